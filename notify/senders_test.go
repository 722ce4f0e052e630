package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeAnswer is how a test server answers: a status, headers and body, or
// no answer at all (hang) until the client gives up.
type fakeAnswer struct {
	status int
	header map[string]string
	body   string
	hang   bool
}

// request is what a test server received.
type request struct {
	method, path string
	header       http.Header
	body         []byte
}

// fakeServer starts a local server answering every request with a and
// recording it.
func fakeServer(t testing.TB, a fakeAnswer) (*httptest.Server, chan request) {
	t.Helper()
	got := make(chan request, 100)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case got <- request{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body}:
		default:
		}
		if a.hang {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv, got
}

// channelFor is a channel of type typ whose endpoint is base.
func channelFor(typ, base string) ChannelConfig {
	cc := ChannelConfig{Name: typ, Type: typ}
	switch typ {
	case TypeTelegram:
		cc.URL, cc.Token, cc.ChatID = base, "123456:SECRET-token", "-1001"
	case TypeSlack:
		cc.URL = base + "/services/T0/B0/SECRETslack"
	case TypeDiscord:
		cc.URL = base + "/api/webhooks/1/SECRETdiscord"
	case TypeWebhook:
		cc.URL, cc.Headers = base+"/hook", map[string]string{"Authorization": "Bearer SECRETheader"}
	}
	return cc
}

var testNow = time.Date(2025, 3, 14, 9, 26, 53, 0, time.UTC)

func testSender(t testing.TB, cc ChannelConfig) Sender {
	t.Helper()
	d := &Dispatcher{opts: options{hc: &http.Client{}, now: func() time.Time { return testNow }}}
	s, err := d.newSender(cc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sampleMessage() Message {
	return Message{Time: testNow, Kind: KindAction, Severity: "warning", Rule: "max-leverage", Symbol: "XBTCUSDT",
		Action: "lower_leverage", Text: "lowered XBTCUSDT leverage 20→10", Values: &Figures{Leverage: 20}}
}

func TestSendersAnswers(t *testing.T) {
	t.Parallel()
	tg429 := `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}`
	tests := []struct {
		name    string
		typ     string
		answer  fakeAnswer
		wantErr bool
		status  int
		retry   time.Duration
		perm    bool
		timeout bool
		msg     string
	}{
		{name: "ok", typ: TypeSlack, answer: fakeAnswer{status: 200, body: "ok"}},
		{name: "429 Retry-After", typ: TypeSlack, answer: fakeAnswer{status: 429, header: map[string]string{"Retry-After": "7"}, body: "rate_limited"},
			wantErr: true, status: 429, retry: 7 * time.Second, msg: "rate_limited"},
		{name: "500", typ: TypeSlack, answer: fakeAnswer{status: 500, body: "oops"}, wantErr: true, status: 500},
		{name: "404 no_service", typ: TypeSlack, answer: fakeAnswer{status: 404, body: "no_service"}, wantErr: true, status: 404, perm: true, msg: "no_service"},
		{name: "timeout", typ: TypeSlack, answer: fakeAnswer{hang: true}, wantErr: true, timeout: true},

		{name: "ok", typ: TypeTelegram, answer: fakeAnswer{status: 200, body: `{"ok":true,"result":{"message_id":1}}`}},
		{name: "429 retry_after", typ: TypeTelegram, answer: fakeAnswer{status: 429, body: tg429},
			wantErr: true, status: 429, retry: 3 * time.Second, msg: "Too Many Requests"},
		{name: "400 chat not found", typ: TypeTelegram, answer: fakeAnswer{status: 400, body: `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`},
			wantErr: true, status: 400, perm: true, msg: "chat not found"},
		{name: "500 html", typ: TypeTelegram, answer: fakeAnswer{status: 502, body: "<html>bad gateway</html>"}, wantErr: true, status: 502},
		{name: "200 not ok", typ: TypeTelegram, answer: fakeAnswer{status: 200, body: `{"ok":false,"error_code":401,"description":"Unauthorized"}`},
			wantErr: true, status: 401, perm: true},
		{name: "timeout", typ: TypeTelegram, answer: fakeAnswer{hang: true}, wantErr: true, timeout: true},

		{name: "204", typ: TypeDiscord, answer: fakeAnswer{status: 204}},
		{name: "429 json retry_after", typ: TypeDiscord, answer: fakeAnswer{status: 429, header: map[string]string{"Retry-After": "2"},
			body: `{"message":"You are being rate limited.","retry_after":1.5,"global":false}`}, wantErr: true, status: 429, retry: 1500 * time.Millisecond},
		{name: "429 header only", typ: TypeDiscord, answer: fakeAnswer{status: 429, header: map[string]string{"Retry-After": "2"}},
			wantErr: true, status: 429, retry: 2 * time.Second},
		{name: "500", typ: TypeDiscord, answer: fakeAnswer{status: 500}, wantErr: true, status: 500, msg: "Internal Server Error"},
		{name: "timeout", typ: TypeDiscord, answer: fakeAnswer{hang: true}, wantErr: true, timeout: true},

		{name: "202", typ: TypeWebhook, answer: fakeAnswer{status: 202}},
		{name: "429 date", typ: TypeWebhook, answer: fakeAnswer{status: 429,
			header: map[string]string{"Retry-After": testNow.Add(90 * time.Second).Format(http.TimeFormat)}}, wantErr: true, status: 429, retry: 90 * time.Second},
		{name: "503", typ: TypeWebhook, answer: fakeAnswer{status: 503}, wantErr: true, status: 503},
		{name: "408", typ: TypeWebhook, answer: fakeAnswer{status: 408}, wantErr: true, status: 408},
		{name: "401", typ: TypeWebhook, answer: fakeAnswer{status: 401}, wantErr: true, status: 401, perm: true},
		{name: "timeout", typ: TypeWebhook, answer: fakeAnswer{hang: true}, wantErr: true, timeout: true},
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := fakeServer(t, tt.answer)
			s := testSender(t, channelFor(tt.typ, srv.URL))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if tt.timeout {
				ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
			}
			defer cancel()
			err := s.Send(ctx, sampleMessage())
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Send: %v", err)
				}
				return
			}
			var de *DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DeliveryError", err, err)
			}
			if de.Status != tt.status || de.RetryAfter != tt.retry || de.Permanent != tt.perm {
				t.Errorf("got status %d retry %s permanent %v, want %d %s %v", de.Status, de.RetryAfter, de.Permanent, tt.status, tt.retry, tt.perm)
			}
			if tt.timeout != errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("timeout: errors.Is(%v, DeadlineExceeded) = %v", err, !tt.timeout)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q lacks %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error %q reveals a secret", err)
			}
		})
	}
}

func TestSendersRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		typ      string
		status   int
		wantPath string
		check    func(t *testing.T, r request)
	}{
		{TypeSlack, 200, "/services/T0/B0/SECRETslack", func(t *testing.T, r request) {
			var b map[string]any
			mustJSON(t, r.body, &b)
			if b["text"] != "lowered XBTCUSDT leverage 20→10" || len(b) != 1 {
				t.Errorf("slack body %s", r.body)
			}
		}},
		{TypeTelegram, 200, "/bot123456:SECRET-token/sendMessage", func(t *testing.T, r request) {
			var b map[string]any
			mustJSON(t, r.body, &b)
			if b["chat_id"] != "-1001" || b["text"] != "lowered XBTCUSDT leverage 20→10" || b["parse_mode"] != nil {
				t.Errorf("telegram body %s", r.body)
			}
		}},
		{TypeDiscord, 204, "/api/webhooks/1/SECRETdiscord", func(t *testing.T, r request) {
			var b struct {
				Content         string `json:"content"`
				AllowedMentions struct {
					Parse []string `json:"parse"`
				} `json:"allowed_mentions"`
			}
			mustJSON(t, r.body, &b)
			if b.Content != "lowered XBTCUSDT leverage 20→10" || b.AllowedMentions.Parse == nil || len(b.AllowedMentions.Parse) != 0 {
				t.Errorf("discord body %s", r.body)
			}
		}},
		{TypeWebhook, 200, "/hook", func(t *testing.T, r request) {
			if r.header.Get("Authorization") != "Bearer SECRETheader" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("webhook headers %v", r.header)
			}
			var m Message
			mustJSON(t, r.body, &m)
			want := sampleMessage()
			if m.Kind != want.Kind || m.Rule != want.Rule || m.Symbol != want.Symbol || m.Text != want.Text || !m.Time.Equal(want.Time) || m.Values == nil || m.Values.Leverage != 20 {
				t.Errorf("webhook body %s", r.body)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			t.Parallel()
			srv, got := fakeServer(t, fakeAnswer{status: tt.status, body: `{"ok":true}`})
			if err := testSender(t, channelFor(tt.typ, srv.URL)).Send(context.Background(), sampleMessage()); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.method != http.MethodPost || r.path != tt.wantPath {
				t.Errorf("%s %s, want POST %s", r.method, r.path, tt.wantPath)
			}
			tt.check(t, r)
		})
	}
}

func mustJSON(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
}

// TestSendersRedactTransportErrors: net/http quotes the URL in its errors,
// and Telegram's, Slack's and Discord's URLs hold their secret.
func TestSendersRedactTransportErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close() // connection refused from now on
	for _, typ := range []string{TypeTelegram, TypeSlack, TypeDiscord, TypeWebhook} {
		cc := channelFor(typ, base)
		if typ == TypeWebhook {
			cc.URL = base + "/hook?token=SECRETquery"
		}
		err := testSender(t, cc).Send(context.Background(), sampleMessage())
		if err == nil {
			t.Fatalf("%s: no error from a closed server", typ)
		}
		if strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "REDACTED") {
			t.Errorf("%s: error %q", typ, err)
		}
	}
}

func TestTruncateForServices(t *testing.T) {
	t.Parallel()
	srv, got := fakeServer(t, fakeAnswer{status: 204})
	m := sampleMessage()
	m.Text = strings.Repeat("é", 3000)
	if err := testSender(t, channelFor(TypeDiscord, srv.URL)).Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	var b struct{ Content string }
	mustJSON(t, (<-got).body, &b)
	if n := len([]rune(b.Content)); n != discordMaxText || !strings.HasSuffix(b.Content, "…") {
		t.Errorf("discord content of %d characters", n)
	}
}

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"5", 5 * time.Second}, {"0.25", 250 * time.Millisecond}, {"-3", 0}, {"soon", 0}, {"NaN", 0},
		{testNow.Add(time.Minute).Format(http.TimeFormat), time.Minute},
		{testNow.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"1e12", 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfterHeader(tt.in, testNow); got != tt.want {
			t.Errorf("retryAfterHeader(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
