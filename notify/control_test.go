package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeBot speaks the part of the Bot API the control uses: getUpdates
// (long polling, offsets), sendMessage (with a 429 once when asked),
// answerCallbackQuery and editMessageText.
type fakeBot struct {
	t     *testing.T
	token string

	mu       sync.Mutex
	queue    []map[string]any // updates not yet confirmed
	nextID   int64
	sent     []map[string]any // by method "sendMessage" etc.: the bodies
	methods  []string
	rateOnce bool // answer the next sendMessage with 429, retry_after 1
	arrived  chan struct{}
}

func newFakeBot(t *testing.T) (*fakeBot, *httptest.Server) {
	b := &fakeBot{t: t, token: "123:secret-token", nextID: 1, arrived: make(chan struct{}, 64)}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return b, srv
}

func (b *fakeBot) push(u map[string]any) {
	b.mu.Lock()
	u["update_id"] = b.nextID
	b.nextID++
	b.queue = append(b.queue, u)
	b.mu.Unlock()
}

func (b *fakeBot) message(chat int64, user, text string) {
	b.push(map[string]any{"message": map[string]any{"message_id": 1, "from": map[string]any{"id": 7, "username": user},
		"chat": map[string]any{"id": chat, "type": "private"}, "text": text}})
}

func (b *fakeBot) press(chat int64, user, data string) {
	b.push(map[string]any{"callback_query": map[string]any{"id": "cq1", "from": map[string]any{"id": 7, "username": user}, "data": data,
		"message": map[string]any{"message_id": 42, "chat": map[string]any{"id": chat}}}})
}

func (b *fakeBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method, ok := strings.CutPrefix(r.URL.Path, "/bot"+b.token+"/")
	if !ok || r.Method != http.MethodPost {
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 404, "description": "Not Found"})
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		b.t.Errorf("%s: body: %v", method, err)
	}
	reply := func(result any) { json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result}) }
	switch method {
	case "getUpdates":
		offset := int64(body["offset"].(float64))
		deadline := time.Now().Add(200 * time.Millisecond) // a short long poll
		for {
			b.mu.Lock()
			var out []map[string]any
			kept := b.queue[:0]
			for _, u := range b.queue {
				if u["update_id"].(int64) >= offset {
					kept = append(kept, u)
					out = append(out, u)
				}
			}
			b.queue = kept
			b.mu.Unlock()
			if len(out) > 0 || time.Now().After(deadline) {
				if out == nil {
					out = []map[string]any{}
				}
				reply(out)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	case "sendMessage", "answerCallbackQuery", "editMessageText":
		b.mu.Lock()
		if method == "sendMessage" && b.rateOnce {
			b.rateOnce = false
			b.mu.Unlock()
			w.WriteHeader(http.StatusTooManyRequests)
			json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
				"parameters": map[string]any{"retry_after": 1}})
			return
		}
		body["method"] = method
		b.sent = append(b.sent, body)
		b.mu.Unlock()
		b.arrived <- struct{}{}
		reply(map[string]any{"message_id": 42})
	default:
		w.WriteHeader(http.StatusNotFound)
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 404, "description": "Not Found: method " + method})
	}
}

// next waits for the next call of the fake's outbound methods.
func (b *fakeBot) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case <-b.arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("no call of sendMessage, answerCallbackQuery or editMessageText within 5s")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sent[len(b.sent)-1]
}

func (b *fakeBot) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sent)
}

// fakeController records what the control asked.
type fakeController struct {
	mu    sync.Mutex
	calls []string
}

func (c *fakeController) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *fakeController) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *fakeController) Status(context.Context) string {
	c.record("status")
	return "guard running: 3 positions"
}
func (c *fakeController) Pause(_ context.Context, by string, d time.Duration) (string, error) {
	c.record(fmt.Sprintf("pause %s %s", by, d))
	return "paused for " + d.String(), nil
}
func (c *fakeController) Resume(_ context.Context, by string) (string, error) {
	c.record("resume " + by)
	return "resumed", nil
}
func (c *fakeController) Silence(_ context.Context, by, target string, d time.Duration) (string, error) {
	c.record(fmt.Sprintf("silence %s %s %s", by, target, d))
	return "silenced " + target, nil
}
func (c *fakeController) Ack(_ context.Context, by string) (string, error) {
	c.record("ack " + by)
	return "acknowledged 1 alert", nil
}

type controlClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *controlClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *controlClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func startControl(t *testing.T) (*fakeBot, *fakeController, *controlClock) {
	t.Helper()
	bot, srv := newFakeBot(t)
	ctrl := &fakeController{}
	clk := &controlClock{t: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	tc, err := NewTelegramControl(ChannelConfig{Name: "ops", Type: TypeTelegram, URL: srv.URL, Token: bot.token, ControlChats: []string{"100"}},
		ctrl, WithControlClock(clk.now), WithPollTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tc.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("the control did not stop within 5s")
		}
	})
	return bot, ctrl, clk
}

func keyboardData(t *testing.T, msg map[string]any) []string {
	t.Helper()
	rm, ok := msg["reply_markup"].(map[string]any)
	if !ok {
		t.Fatalf("no inline keyboard in %v", msg)
	}
	var out []string
	for _, row := range rm["inline_keyboard"].([]any) {
		for _, b := range row.([]any) {
			out = append(out, b.(map[string]any)["callback_data"].(string))
		}
	}
	return out
}

func TestTelegramControlCommands(t *testing.T) {
	t.Parallel()
	bot, ctrl, _ := startControl(t)

	bot.message(100, "alice", "/status")
	if m := bot.next(t); m["chat_id"] != "100" || m["text"] != "guard running: 3 positions" {
		t.Errorf("/status answered %v", m)
	}

	bot.message(100, "alice", "/silence XBTC 30m")
	if m := bot.next(t); m["text"] != "silenced XBTC" {
		t.Errorf("/silence answered %v", m)
	}
	bot.message(100, "alice", "/ack@riskguard_bot")
	if m := bot.next(t); m["text"] != "acknowledged 1 alert" {
		t.Errorf("/ack answered %v", m)
	}
	bot.message(100, "alice", "/silence XBTC")
	if m := bot.next(t); !strings.HasPrefix(m["text"].(string), "usage: /silence") {
		t.Errorf("a bad /silence answered %v", m)
	}
	bot.message(100, "alice", "hello")
	if m := bot.next(t); !strings.Contains(m["text"].(string), "/pause [1h]") {
		t.Errorf("an unknown command answered %v", m)
	}

	// /pause asks first; the button pauses.
	bot.message(100, "alice", "/pause 1h")
	ask := bot.next(t)
	if !strings.Contains(ask["text"].(string), "Pause every action for 1h0m0s?") {
		t.Errorf("/pause asked %v", ask)
	}
	data := keyboardData(t, ask)
	if len(data) != 2 || !strings.HasPrefix(data[0], "yes:") || !strings.HasPrefix(data[1], "no:") {
		t.Fatalf("buttons %q", data)
	}
	if got := ctrl.all(); strings.Contains(strings.Join(got, ";"), "pause") {
		t.Fatalf("paused before the confirmation: %q", got)
	}
	bot.press(100, "alice", data[0])
	answer, edit := bot.next(t), bot.next(t)
	if answer["method"] != "answerCallbackQuery" || answer["text"] != "paused for 1h0m0s" || edit["method"] != "editMessageText" {
		t.Errorf("the button answered %v, then %v", answer, edit)
	}
	// The same button again: spent.
	bot.press(100, "alice", data[0])
	if m := bot.next(t); !strings.Contains(m["text"].(string), "expired") {
		t.Errorf("a spent button answered %v", m)
	}
	bot.next(t) // its edit

	// /resume, cancelled.
	bot.message(100, "alice", "/resume")
	data = keyboardData(t, bot.next(t))
	bot.press(100, "alice", data[1])
	if m := bot.next(t); m["text"] != "Cancelled." {
		t.Errorf("cancel answered %v", m)
	}
	bot.next(t)

	want := []string{"status", "silence telegram:@alice XBTC 30m0s", "ack telegram:@alice", "pause telegram:@alice 1h0m0s"}
	if got := ctrl.all(); strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("controller calls %q, want %q", got, want)
	}
}

// A chat not in control_chat_ids is not heard: no answer, no action, not
// even to its buttons.
func TestTelegramControlIgnoresOtherChats(t *testing.T) {
	t.Parallel()
	bot, ctrl, _ := startControl(t)
	bot.message(100, "alice", "/pause")
	data := keyboardData(t, bot.next(t))
	bot.message(999, "mallory", "/status")
	bot.message(999, "mallory", "/resume")
	bot.press(999, "mallory", data[0]) // alice's button, pressed from elsewhere
	bot.message(100, "alice", "/status")
	if m := bot.next(t); m["chat_id"] != "100" || m["text"] != "guard running: 3 positions" {
		t.Errorf("next answer %v, want alice's status", m)
	}
	if got := ctrl.all(); len(got) != 1 || got[0] != "status" {
		t.Errorf("controller calls %q, want alice's status only", got)
	}
	if n := bot.count(); n != 2 {
		t.Errorf("%d outbound calls, want 2 (alice's question and status)", n)
	}
}

// A confirmation expires after five minutes.
func TestTelegramControlButtonExpires(t *testing.T) {
	t.Parallel()
	bot, ctrl, clk := startControl(t)
	bot.message(100, "alice", "/pause")
	data := keyboardData(t, bot.next(t))
	clk.add(6 * time.Minute)
	bot.press(100, "alice", data[0])
	if m := bot.next(t); !strings.Contains(m["text"].(string), "expired") {
		t.Errorf("a late button answered %v", m)
	}
	if len(ctrl.all()) != 0 {
		t.Errorf("a late button acted: %q", ctrl.all())
	}
}

// Telegram's 429 is honoured: the reply goes out after retry_after.
func TestTelegramControlRateLimited(t *testing.T) {
	t.Parallel()
	bot, _, _ := startControl(t)
	bot.mu.Lock()
	bot.rateOnce = true
	bot.mu.Unlock()
	start := time.Now()
	bot.message(100, "alice", "/status")
	if m := bot.next(t); m["text"] != "guard running: 3 positions" {
		t.Errorf("answer %v", m)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("the reply came %s after a 429 asking for 1s", waited)
	}
}

func TestTelegramControlConfig(t *testing.T) {
	t.Parallel()
	raw := map[string]any{"channels": map[string]any{"ops": map[string]any{"type": "telegram", "token": "1:x", "chat_id": 100,
		"control_chat_ids": []any{100, "-1001234"}}}}
	cfg, errs := ParseConfig(raw, func(string) string { return "" })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := cfg.Channels["ops"].ControlChats; strings.Join(got, ",") != "100,-1001234" {
		t.Errorf("control chats %q", got)
	}
	raw["channels"].(map[string]any)["ops"].(map[string]any)["control_chat_ids"] = "100"
	if _, errs := ParseConfig(raw, func(string) string { return "" }); len(errs) == 0 || !strings.Contains(errs[0].Error(), "control_chat_ids") {
		t.Errorf("a bad control_chat_ids: %v", errs)
	}
}
