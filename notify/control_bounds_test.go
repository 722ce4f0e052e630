package notify

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// boundedBot answers getUpdates by the limit asked: past 50 an answer
// longer than the control reads, at 50 or fewer an update without an id
// (undecodable), an undecodable one with an id, and /status from chat 100.
type boundedBot struct {
	mu      sync.Mutex
	limits  []int
	offsets []int64
	replies []string
}

func (b *boundedBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body)
	if strings.HasSuffix(r.URL.Path, "/sendMessage") {
		b.mu.Lock()
		b.replies = append(b.replies, body["text"].(string))
		b.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": map[string]any{"message_id": 1}})
		return
	}
	limit, _ := body["limit"].(float64)
	offset, _ := body["offset"].(float64)
	b.mu.Lock()
	b.limits, b.offsets = append(b.limits, int(limit)), append(b.offsets, int64(offset))
	b.mu.Unlock()
	switch {
	case limit > 50:
		w.Write([]byte(`{"ok":true,"result":[{"update_id":1,"message":{"text":"`))
		w.Write([]byte(strings.Repeat("x", maxUpdatesAnswer)))
		w.Write([]byte(`"}}]}`))
	case offset <= 3:
		w.Write([]byte(`{"ok":true,"result":[{"update_id":1,"message":{"chat":{"id":"x"}}},"not an update",` +
			`{"update_id":3,"message":{"message_id":1,"from":{"id":7,"username":"alice"},"chat":{"id":100},"text":"/status"}}]}`))
	default:
		time.Sleep(50 * time.Millisecond)
		w.Write([]byte(`{"ok":true,"result":[]}`))
	}
}

// An answer longer than the control reads halves the limit it asks for;
// updates that cannot be decoded, with an id or without, are passed; the
// command behind them is answered and the offset moves past all three.
func TestTelegramControlBoundsAndSkips(t *testing.T) {
	t.Parallel()
	bot := &boundedBot{}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	tc, err := NewTelegramControl(ChannelConfig{Name: "ops", Type: TypeTelegram, URL: srv.URL, Token: "1:tok", ControlChats: []string{"100"}},
		&fakeController{}, WithPollTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		bot.mu.Lock()
		replies, offsets := slices.Clone(bot.replies), slices.Clone(bot.offsets)
		limits := slices.Clone(bot.limits)
		bot.mu.Unlock()
		if len(replies) > 0 && slices.Contains(offsets, 4) {
			if replies[0] != "guard running: 3 positions" {
				t.Errorf("reply %q", replies[0])
			}
			if len(limits) < 3 || limits[0] != 100 || limits[1] != 50 || limits[2] != 100 {
				t.Errorf("limits %v, want 100, then 50 after the long answer, then 100 again", limits)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reply past the undecodable updates: replies %q, offsets %v, limits %v", replies, offsets, limits)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
