package notify

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Every row of the channel table parses a minimal valid mapping of its
// type, builds its sender, and delivers a test message through it: to a
// local HTTP server, a local SMTP server or the log. A new row without a
// minimal mapping here fails.
func TestChannelTableRows(t *testing.T) {
	t.Parallel()
	srv, got := fakeServer(t, fakeAnswer{status: 200, body: `{"ok":true,"result":{}}`})
	mail := startSMTP(t, &smtpServer{})
	// minimal is each type's smallest valid mapping, and the request path
	// its message arrives at on srv ("" when it is not sent over HTTP).
	minimal := map[string]struct{ src, path string }{
		TypeTelegram: {fmt.Sprintf(`{type: telegram, token_env: TELEGRAM_TOKEN, chat_id: 1, api_url: %q}`, srv.URL), "/bot123456:SECRET-telegram/sendMessage"},
		TypeSlack:    {fmt.Sprintf(`{type: slack, webhook_url: %q}`, srv.URL+"/services/T0/B0/SECRETslack"), "/services/T0/B0/SECRETslack"},
		TypeDiscord:  {fmt.Sprintf(`{type: discord, webhook_url: %q}`, srv.URL+"/api/webhooks/1/SECRETdiscord"), "/api/webhooks/1/SECRETdiscord"},
		TypeWebhook:  {fmt.Sprintf(`{type: webhook, url: %q}`, srv.URL+"/hook"), "/hook"},
		TypeEmail:    {fmt.Sprintf(`{type: email, smtp: %q, from: guard@example.org, to: [me@example.org]}`, mail.addr), ""},
		TypeLog:      {`{type: log}`, ""},
	}
	seen := map[string]bool{}
	for _, row := range channelTypes() {
		t.Run(row.name, func(t *testing.T) {
			if row.name == "" || seen[row.name] {
				t.Fatalf("type %q is empty or in the table twice", row.name)
			}
			seen[row.name] = true
			if row.decode == nil || row.sender == nil {
				t.Fatal("row without decode or sender")
			}
			if typ, ok := channelTypeOf(row.name); !ok || typ.name != row.name {
				t.Fatalf("channelTypeOf(%q) = %q, %v", row.name, typ.name, ok)
			}
			mm, ok := minimal[row.name]
			if !ok {
				t.Fatalf("no minimal mapping for type %q: add one to this test", row.name)
			}
			cfg, errs := ParseConfig(decode(t, "channels: {c: "+mm.src+"}"), envFunc(exampleEnv))
			if len(errs) > 0 {
				t.Fatalf("%s: %v", mm.src, errs)
			}
			if cc := cfg.Channels["c"]; cc.Type != row.name || cc.Name != "c" {
				t.Fatalf("parsed %+v", cc)
			}
			var logs bytes.Buffer
			d, err := NewDispatcher(cfg, WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			defer d.Close(ctx)
			res, err := d.Test(ctx, "c")
			if err != nil || len(res) != 1 || res[0].Err != nil {
				t.Fatalf("test message: %v, %+v", err, res)
			}
			const want = "riskguard test message to channel c"
			switch {
			case mm.path != "":
				select {
				case r := <-got:
					if r.path != mm.path || !bytes.Contains(r.body, []byte(want)) {
						t.Errorf("request %s %s", r.path, r.body)
					}
				default:
					t.Error("no request")
				}
			case row.name == TypeEmail:
				select {
				case m := <-mail.got:
					if !strings.Contains(m.data, want) {
						t.Errorf("mail %q", m.data)
					}
				default:
					t.Error("no mail")
				}
			case row.name == TypeLog:
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log %q", logs.String())
				}
			}
		})
	}
}

// The type: errors list the table's types, in its order, with today's
// wording.
func TestChannelTypeErrors(t *testing.T) {
	t.Parallel()
	const known = "telegram, slack, discord, webhook, email, log"
	if got := channelTypeNames(); got != known {
		t.Errorf("channel types %q, want %q", got, known)
	}
	for src, want := range map[string]string{
		`{channels: {c: {chat_id: 1}}}`:  "notify.channels.c.type: required: one of " + known,
		`{channels: {c: {type: ""}}}`:    "notify.channels.c.type: required: one of " + known,
		`{channels: {c: {type: 5}}}`:     "notify.channels.c.type: required: one of " + known,
		`{channels: {c: {type: Slack}}}`: `notify.channels.c.type: unknown type "Slack" (known: ` + known + ")",
	} {
		_, errs := ParseConfig(decode(t, src), nil)
		if len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("%s: errors %v, want [%s]", src, errs, want)
		}
	}
}
