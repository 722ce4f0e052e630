package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// botAPI is a local Bot API server: getUpdates serves the queued updates
// (a short long poll), the other methods are recorded.
type botAPI struct {
	mu    sync.Mutex
	queue []map[string]any
	next  int64
	calls []map[string]any
}

func (b *botAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	method := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if !strings.HasPrefix(r.URL.Path, "/bot1:tok/") {
		w.WriteHeader(http.StatusUnauthorized)
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 401, "description": "Unauthorized"})
		return
	}
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	if method == "getUpdates" {
		offset, _ := body["offset"].(float64)
		for range 20 { // up to 200 ms
			b.mu.Lock()
			var out []map[string]any
			for _, u := range b.queue {
				if float64(u["update_id"].(int64)) >= offset {
					out = append(out, u)
				}
			}
			b.mu.Unlock()
			if len(out) > 0 {
				json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": out})
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": []any{}})
		return
	}
	body["method"] = method
	b.mu.Lock()
	b.calls = append(b.calls, body)
	b.mu.Unlock()
	json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{"message_id": 9}})
}

func (b *botAPI) push(u map[string]any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next++
	u["update_id"] = b.next
	b.queue = append(b.queue, u)
}

func (b *botAPI) say(chat int64, text string) {
	b.push(map[string]any{"message": map[string]any{"message_id": 1, "from": map[string]any{"id": 7, "username": "alice"},
		"chat": map[string]any{"id": chat}, "text": text}})
}

func (b *botAPI) press(chat int64, data string) {
	b.push(map[string]any{"callback_query": map[string]any{"id": "q", "from": map[string]any{"id": 7, "username": "alice"}, "data": data,
		"message": map[string]any{"message_id": 9, "chat": map[string]any{"id": chat}}}})
}

// sent returns the sendMessage bodies to chat whose text contains s.
func (b *botAPI) sent(chat, s string) []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, c := range b.calls {
		if c["method"] == "sendMessage" && c["chat_id"] == chat && strings.Contains(c["text"].(string), s) {
			out = append(out, c)
		}
	}
	return out
}

// confirm presses the "yes" button of the last question containing q.
func (b *botAPI) confirm(t *testing.T, q string) {
	t.Helper()
	waitFor(t, "the question "+q, 10*time.Second, func() bool { return len(b.sent("100", q)) > 0 })
	msgs := b.sent("100", q)
	kb := msgs[len(msgs)-1]["reply_markup"].(map[string]any)["inline_keyboard"].([]any)
	yes := kb[0].([]any)[0].(map[string]any)["callback_data"].(string)
	b.press(100, yes)
}

// Telegram steers the real daemon: a paused guard sends nothing and says
// what it would do; an unlisted chat is not heard; /resume lets it act;
// /status and /silence answer.
func TestTelegramControlsTheDaemon(t *testing.T) {
	t.Parallel()
	bot := &botAPI{}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	g := newGuardEnv(t, "", nearLiqXETH)
	body := strings.Replace(readFile(t, g.config), "rules:\n", "notify:\n  channels:\n    ops: {type: telegram, token_env: TG_TOKEN, chat_id: 100, api_url: "+srv.URL+", control_chat_ids: [100]}\n  group_wait: 0s\nrules:\n", 1)
	writeFile(t, g.config, body)
	env := campaignEnv(g.url)
	env["TG_TOKEN"] = "1:tok"
	d := g.start(env)
	waitFor(t, "the control listening", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "telegram control listening") })

	bot.say(100, "/pause")
	bot.confirm(t, "Pause every action until resumed?")
	waitFor(t, "paused", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "guard PAUSED by telegram:@alice") })

	g.putNearLiquidation("XETH", "ETH", 0.03)
	waitFor(t, "the held action said", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "would cancel_orders XETH, paused") })
	bot.say(999, "/resume") // not an allowed chat
	time.Sleep(500 * time.Millisecond)
	if calls := g.mutatingOn("XETH"); len(calls) != 0 {
		t.Fatalf("a paused guard sent %+v", calls)
	}
	if len(bot.sent("999", "")) != 0 {
		t.Error("an unlisted chat got an answer")
	}

	bot.say(100, "/status")
	waitFor(t, "the status", 10*time.Second, func() bool { return len(bot.sent("100", "PAUSED (every rule and symbol) by telegram:@alice")) > 0 })
	if st := bot.sent("100", "PAUSED (every rule and symbol)"); !strings.Contains(st[0]["text"].(string), "XETH SHORT") {
		t.Errorf("/status: %s", st[0]["text"])
	}
	bot.say(100, "/silence XBTC 30m")
	waitFor(t, "the silence", 10*time.Second, func() bool { return len(bot.sent("100", "Silenced symbol XBTC until")) > 0 })
	bot.say(100, "/silence XBCT 30m")
	waitFor(t, "the did-you-mean", 10*time.Second, func() bool { return len(bot.sent("100", `did you mean XBTC?`)) > 0 })

	bot.say(100, "/resume")
	bot.confirm(t, "Resume the guard's actions?")
	waitFor(t, "XETH acted on once resumed", 10*time.Second, func() bool { return len(g.mutatingOn("XETH")) > 0 })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	var by []string
	for _, r := range g.auditLines() {
		if r.By != "" {
			by = append(by, r.Type+" "+r.By)
		}
	}
	if s := strings.Join(by, ";"); !strings.Contains(s, "telegram:@alice") {
		t.Errorf("the control actions are not audited with their author: %q", by)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}
