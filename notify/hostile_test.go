package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"slices"
	"strings"
	"testing"
	"time"
)

// Hostile texts as an exchange's error, a comment, a symbol or a rule's
// text may carry them: a Slack ping and disguised link, a Discord masked
// link and @everyone, and a line break that would start a new mail header.
const (
	hostileSlack   = "<!channel> <https://evil.example/login|Session expired: log in again>"
	hostileDiscord = "[Session expired: log in again](https://evil.example/login) @everyone \\[again\\](https://evil.example/x)"
	hostileHeader  = "\rBcc: victim@example.org"
)

// hostileMessage is an action failure whose text quotes the exchange's
// hostile error, about a rule and symbol with hostile names.
func hostileMessage() Message {
	return Message{Time: testNow, Kind: KindActionFailed, Severity: "critical",
		Rule: "r <!here> & co", Symbol: "XBTC\r\nBcc: victim@example.org", Action: "lower_leverage",
		Text: "❌ lower_leverage XBTC failed: " + hostileSlack + " " + hostileDiscord + hostileHeader + "\nsecond line & <b>more</b>"}
}

// Every channel shows the hostile strings as written and lets none of them
// act: Slack escapes <, > and & (no ping, no disguised link), Discord
// escapes masked links and disables mentions, Telegram sends plain text
// (no parse mode), the webhook's JSON escapes them and decodes to the
// original, e-mail keeps them out of its headers, and the log quotes them
// on one line. A new channel type without a case here fails.
func TestHostileTextOnEveryChannel(t *testing.T) {
	t.Parallel()
	m := hostileMessage()
	// check sends m through the channel and checks what arrived.
	checks := map[string]func(t *testing.T){
		TypeSlack: func(t *testing.T) {
			body := sendOverHTTP(t, TypeSlack, 200, m)
			var b struct{ Text string }
			mustJSON(t, body, &b)
			if strings.ContainsAny(b.Text, "<>") {
				t.Errorf("slack text keeps < or >: %q", b.Text)
			}
			for _, want := range []string{"&lt;!channel&gt; &lt;https://evil.example/login|Session expired: log in again&gt;", "second line &amp; &lt;b&gt;more&lt;/b&gt;"} {
				if !strings.Contains(b.Text, want) {
					t.Errorf("slack text %q lacks %q", b.Text, want)
				}
			}
			if strings.Contains(strings.ReplaceAll(b.Text, "&amp;", ""), "&amp") {
				t.Errorf("slack text escaped twice: %q", b.Text)
			}
		},
		TypeDiscord: func(t *testing.T) {
			body := sendOverHTTP(t, TypeDiscord, 204, m)
			var b struct {
				Content         string
				AllowedMentions struct{ Parse []string } `json:"allowed_mentions"`
			}
			mustJSON(t, body, &b)
			if b.AllowedMentions.Parse == nil || len(b.AllowedMentions.Parse) != 0 {
				t.Errorf("discord allows mentions: %s", body)
			}
			if want := `\[Session expired: log in again\](https://evil.example/login) @everyone \\\[again\\\](https://evil.example/x)`; !strings.Contains(b.Content, want) {
				t.Errorf("discord content %q lacks the escaped links %q", b.Content, want)
			}
			if unescapedBracket(b.Content) {
				t.Errorf("discord content keeps a bracket that can make a masked link: %q", b.Content)
			}
			if got := unescapeDiscord(b.Content); got != m.Text {
				t.Errorf("discord content does not read as the text:\n%q\n%q", got, m.Text)
			}
		},
		TypeTelegram: func(t *testing.T) {
			body := sendOverHTTP(t, TypeTelegram, 200, m)
			var b map[string]any
			mustJSON(t, body, &b)
			if _, ok := b["parse_mode"]; ok {
				t.Errorf("telegram sets a parse mode: %s", body)
			}
			if b["text"] != m.Text || b["disable_web_page_preview"] != true {
				t.Errorf("telegram does not send the plain text as written without previews: %s", body)
			}
		},
		TypeWebhook: func(t *testing.T) {
			body := sendOverHTTP(t, TypeWebhook, 200, m)
			if bytes.ContainsAny(body, "<>&\r") {
				t.Errorf("webhook body carries <, >, & or a raw CR: %s", body)
			}
			var got Message
			mustJSON(t, body, &got)
			if got.Text != m.Text || got.Rule != m.Rule || got.Symbol != m.Symbol {
				t.Errorf("webhook body does not decode to the message: %+v", got)
			}
		},
		TypeEmail: func(t *testing.T) {
			s := startSMTP(t, &smtpServer{})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := emailSender(t, s, "", "", nil).Send(ctx, m); err != nil {
				t.Fatal(err)
			}
			var got smtpMail
			select {
			case got = <-s.got:
			case <-ctx.Done():
				t.Fatal("no mail received")
			}
			msg, err := mail.ReadMessage(strings.NewReader(got.data))
			if err != nil {
				t.Fatal(err)
			}
			keys := slices.Sorted(maps.Keys(msg.Header))
			if want := []string{"Content-Transfer-Encoding", "Content-Type", "Date", "From", "Mime-Version", "Subject", "To"}; !slices.Equal(keys, want) {
				t.Errorf("mail headers %q, want %q: a text made a header", keys, want)
			}
			if len(got.to) != 2 {
				t.Errorf("recipients %q", got.to)
			}
			subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
			if first, _, _ := strings.Cut(m.Text, "\n"); err != nil || subject != truncate(first, 120) {
				t.Errorf("subject %q (%v)", subject, err)
			}
			body, _ := io.ReadAll(quotedprintable.NewReader(msg.Body))
			if !strings.Contains(string(body), hostileSlack) {
				t.Errorf("body %q lacks the text as written", body)
			}
		},
		TypeLog: func(t *testing.T) {
			var buf bytes.Buffer
			if err := NewLog(slog.New(slog.NewTextHandler(&buf, nil))).Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(buf.String(), "\n"); n != 1 || strings.Count(buf.String(), "level=") != 1 {
				t.Errorf("the log line was split or forged: %q", buf.String())
			}
		},
	}
	for _, row := range channelTypes() {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			check, ok := checks[row.name]
			if !ok {
				t.Fatalf("no hostile-text check for channel type %q: add one", row.name)
			}
			check(t)
		})
	}
}

// sendOverHTTP sends m through a channel of type typ to a local server
// answering status, and returns the body it received.
func sendOverHTTP(t *testing.T, typ string, status int, m Message) []byte {
	t.Helper()
	srv, got := fakeServer(t, fakeAnswer{status: status, body: `{"ok":true,"result":{"message_id":1}}`})
	if err := testSender(t, channelFor(typ, srv.URL)).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if !json.Valid(r.body) {
			t.Fatalf("%s body is not JSON: %s", typ, r.body)
		}
		return r.body
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
		return nil
	}
}

// unescapeDiscord reads escaped markdown back: each backslash makes the
// next character literal.
func unescapeDiscord(s string) string {
	var b strings.Builder
	esc := false
	for _, r := range s {
		if r == '\\' && !esc {
			esc = true
			continue
		}
		esc = false
		b.WriteRune(r)
	}
	return b.String()
}

// unescapedBracket reports a [ or ] that no backslash escapes.
func unescapedBracket(s string) bool {
	esc := false
	for _, r := range s {
		switch {
		case esc:
			esc = false
		case r == '\\':
			esc = true
		case r == '[' || r == ']':
			return true
		}
	}
	return false
}
