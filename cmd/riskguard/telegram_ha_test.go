package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// singlePollerBot is the Bot API as Telegram runs it for one bot: a
// getUpdates while another is in flight is answered 409 Conflict, and an
// offset confirms (forgets) the updates before it.
type singlePollerBot struct {
	*botAPI
	mu        sync.Mutex
	inFlight  int
	polls     int
	conflicts int
}

func (b *singlePollerBot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/getUpdates") {
		b.botAPI.ServeHTTP(w, r)
		return
	}
	data, _ := io.ReadAll(r.Body)
	var req struct{ Offset int64 }
	json.Unmarshal(data, &req)
	b.mu.Lock()
	if b.inFlight > 0 {
		b.conflicts++
		b.mu.Unlock()
		w.WriteHeader(http.StatusConflict)
		json.NewEncoder(w).Encode(map[string]any{"ok": false, "error_code": 409,
			"description": "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"})
		return
	}
	b.inFlight++
	b.polls++
	b.mu.Unlock()
	defer func() { b.mu.Lock(); b.inFlight--; b.mu.Unlock() }()
	b.botAPI.mu.Lock()
	kept := b.botAPI.queue[:0]
	for _, u := range b.botAPI.queue {
		if u["update_id"].(int64) >= req.Offset {
			kept = append(kept, u)
		}
	}
	b.botAPI.queue = kept
	b.botAPI.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(data))
	b.botAPI.ServeHTTP(w, r)
}

// edited returns the editMessageText bodies (a confirmed command's
// answer) whose text contains s.
func (b *singlePollerBot) edited(s string) []map[string]any {
	b.botAPI.mu.Lock()
	defer b.botAPI.mu.Unlock()
	var out []map[string]any
	for _, c := range b.botAPI.calls {
		if c["method"] == "editMessageText" && strings.Contains(c["text"].(string), s) {
			out = append(out, c)
		}
	}
	return out
}

func (b *singlePollerBot) counts() (polls, conflicts int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.polls, b.conflicts
}

// freePort is a port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Two processes with the same configuration, two accounts spread one
// each, one Telegram bot that allows one poller: only the first account's
// leader polls (no 409 ever), a /pause for the other account is forwarded
// to that account's leader's control API and holds there (in etcd), and
// kill -9 of the poller hands the polling to the other process within the
// lease, which answers.
func TestHATelegramOnePoller(t *testing.T) {
	// Not parallel, like the other HA daemon tests: two binaries.
	h := newHAEnv(t, 1)
	bot := &singlePollerBot{botAPI: &botAPI{}}
	srv := httptest.NewServer(bot)
	defer srv.Close()
	accounts := []string{"acc1", "acc2"}
	var accts strings.Builder
	for _, a := range accounts {
		k, s := ownCredFiles(t, h.dir, a)
		fmt.Fprintf(&accts, "  - name: %s\n    exchange: {api_key_file: %s, api_secret_file: %s}\n", a, k, s)
	}
	body := fmt.Sprintf("exchange:\n  base_url: http://127.0.0.1:1\nengine:\n  interval: %s\n  listen: 127.0.0.1:0\nha:\n  etcd:\n    endpoints: [%s]\n  lease_ttl: %s\n  prefix: /rg-test/\n"+
		"notify:\n  channels:\n    ops: {type: telegram, token_env: TG_TOKEN, chat_id: 100, api_url: %s, control_chat_ids: [100]}\n  group_wait: 0s\naccounts:\n%srules:\n%s",
		haInterval, h.etcd.Endpoints[0], haTTL, srv.URL, accts.String(), haRules)
	if err := os.WriteFile(h.config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	var procs []*haProc
	for _, name := range []string{"p1", "p2"} {
		addr := freePort(t)
		procs = append(procs, h.start(name, 0, "TG_TOKEN=1:tok", "RISKGUARD_ENGINE_LISTEN="+addr, "RISKGUARD_HA_ADVERTISE="+addr))
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range procs {
				t.Logf("%s's log:\n%s", p.name, p.logs.String())
			}
		}
	})
	leaderOf := func(account string, procs ...*haProc) *haProc {
		for _, p := range procs {
			code, body := api(t, p.addr, "GET", "/api/v1/status?account="+account, "", nil)
			var st struct{ HA struct{ Role string } }
			if code == 200 && json.Unmarshal([]byte(body), &st) == nil && st.HA.Role == "leader" {
				return p
			}
		}
		return nil
	}
	var poller, other *haProc
	waitFor(t, "one account each", 20*time.Second, func() bool {
		poller, other = leaderOf("acc1", procs...), leaderOf("acc2", procs...)
		return poller != nil && other != nil && poller != other
	})
	// polling: the process's log says last that it polls the bots.
	polling := func(p *haProc) bool {
		l := p.logs.String()
		return strings.LastIndex(l, "so it polls the bots") > strings.LastIndex(l, "no longer leads the first account")
	}
	waitFor(t, "the first account's leader polling", 10*time.Second, func() bool { return polling(poller) && !polling(other) })
	// The spread settles (a process that led both at first hands one
	// over): from here on the roles hold, and one process polls.
	polls0, conflicts0 := bot.counts()
	waitFor(t, "a few polls", 10*time.Second, func() bool { p, _ := bot.counts(); return p >= polls0+5 })
	if leaderOf("acc1", procs...) != poller {
		t.Fatal("acc1's leader changed while the test looked")
	}

	bot.say(100, "/pause acc2 1h")
	bot.confirm(t, "Pause every action for 1h0m0s?")
	waitFor(t, "the pause forwarded to acc2's leader", 10*time.Second, func() bool {
		return len(bot.edited("sent to the leader, "+other.name)) > 0
	})
	if polling(other) {
		t.Errorf("%s (a standby for acc1) polls the bot too", other.name)
	}
	// The pause is acc2's leader's own: in its state in etcd.
	cli, err := clientv3.New(clientv3.Config{Endpoints: h.etcd.Endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	waitFor(t, "acc2's pause in etcd", 10*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, "/rg-test/accounts/acc2/state/pauses")
		return err == nil && len(resp.Kvs) == 1 && strings.Contains(string(resp.Kvs[0].Value), "telegram:@alice")
	})
	// /status of acc2 is read on the poller, which says it is a standby
	// for acc2 and who leads it.
	bot.say(100, "/status acc2")
	waitFor(t, "/status acc2", 10*time.Second, func() bool {
		return len(bot.sent("100", fmt.Sprintf("read by %s, a standby for this account (it evaluates the same rules); the leader is %s", poller.name, other.name))) > 0
	})
	if _, c := bot.counts(); c != conflicts0 {
		t.Errorf("%d getUpdates answered 409 while the roles held: two pollers", c-conflicts0)
	}

	poller.kill()
	killed := time.Now()
	waitFor(t, "the other process polling", 4*haTTL, func() bool { return polling(other) })
	took := time.Since(killed)
	bot.say(100, "/status acc1")
	waitFor(t, "/status acc1 answered by the new poller", 10*time.Second, func() bool { return len(bot.sent("100", "[acc1] riskguard:")) > 0 })
	t.Logf("kill -9 of the poller %s: %s polled %s later (lease_ttl %s)", poller.name, other.name, took.Round(time.Millisecond), haTTL)
	if limit := haTTL + 500*time.Millisecond + telegramFollowEvery + 300*time.Millisecond; took > limit {
		t.Errorf("the new poller started %s after the kill, more than %s", took, limit)
	}
	if polls, c := bot.counts(); c != conflicts0 {
		t.Errorf("%d of %d getUpdates answered 409: two pollers at once", c-conflicts0, polls)
	}
}
