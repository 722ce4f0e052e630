package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testKey    = "k-test"
	testSecret = "SECRET-7f3a9c-do-not-leak"
)

// sleepRecorder replaces Client.sleep: it records each wait and returns at
// once (or advances a fake clock), so retry tests do not wait.
type sleepRecorder struct {
	mu     sync.Mutex
	delays []time.Duration
	clock  *fakeClock // advanced by each wait when set
}

func (s *sleepRecorder) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	if s.clock != nil {
		s.clock.Advance(d)
	}
	return ctx.Err()
}

func (s *sleepRecorder) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.delays...)
}

// fakeClock is a settable clock for WithClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock(t time.Time) *fakeClock { return &fakeClock{t: t} }

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeClock) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

// setup starts an httptest server with a mux and returns a client for it
// (go-github style). The client's retries do not wait (the waits are
// recorded), jitter is 0.5, the rate limiter is off, and the clock offset is
// taken as measured (zero) so signed calls go straight to the mux; clock
// tests build their own client.
func setup(t *testing.T, opts ...Option) (*Client, *http.ServeMux, *sleepRecorder) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := []Option{WithJitter(func() float64 { return 0.5 }), WithRateLimit(0, 0), WithClockSync(0)}
	c, err := New(srv.URL, testKey, testSecret, append(base, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	rec := &sleepRecorder{}
	c.sleep = rec.sleep
	c.synced = true
	return c, mux, rec
}

// checkSigned verifies on the server side the auth headers and the signature
// of r, recomputed with VerifySignature from what actually arrived, and
// returns the body.
func checkSigned(t *testing.T, r *http.Request) []byte {
	t.Helper()
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read body: %v", err)
	}
	for name, want := range map[string]string{
		HeaderKey:              testKey,
		HeaderSignatureMethod:  SignatureMethod,
		HeaderSignatureVersion: SignatureVersion,
	} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("header %s = %q, want %q", name, got, want)
		}
	}
	ms, err := strconv.ParseInt(r.Header.Get(HeaderTimestamp), 10, 64)
	if err != nil {
		t.Errorf("header %s = %q: %v", HeaderTimestamp, r.Header.Get(HeaderTimestamp), err)
	}
	sig := r.Header.Get(HeaderSignature)
	if len(sig) != 64 || strings.ToLower(sig) != sig {
		t.Errorf("signature %q is not 64 lowercase hex digits", sig)
	}
	in := SigningInput{Method: r.Method, Host: r.Host, Path: r.URL.Path, RawQuery: r.URL.RawQuery,
		Body: body, Key: r.Header.Get(HeaderKey), Timestamp: time.UnixMilli(ms)}
	if !VerifySignature(testSecret, in, sig) {
		t.Errorf("signature does not verify; canonical text:\n%s", CanonicalText(in))
	}
	if r.Method == http.MethodPost {
		if got := r.Header.Get("Content-Type"); got != "application/json" {
			t.Errorf("POST Content-Type = %q, want application/json", got)
		}
	}
	return body
}

// checkPublic asserts that r carries no auth header at all.
func checkPublic(t *testing.T, r *http.Request) {
	t.Helper()
	for name := range r.Header {
		if strings.HasPrefix(strings.ToUpper(name), "API-") {
			t.Errorf("market call %s carries auth header %s", r.URL.Path, name)
		}
	}
}

func writeData(w http.ResponseWriter, data string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"success":true,"data":%s}`, data)
}

func writeFailure(w http.ResponseWriter, status int, code, field, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"success":false,"error":%q,"errorField":%q,"errorMessage":%q}`, code, field, msg)
}

// roundTripFunc is an http.RoundTripper made of a function, for tests that
// need no server.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestNewValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		url         string
		key, secret string
		opts        []Option
		wantErr     string
	}{
		{name: "https ok", url: "https://api.example.com"},
		{name: "http with port and slash ok", url: "http://127.0.0.1:8080/"},
		{name: "public only", url: "https://api.example.com", key: "", secret: ""},
		{name: "ftp", url: "ftp://api.example.com", wantErr: "scheme"},
		{name: "no scheme", url: "api.example.com", wantErr: "scheme"},
		{name: "no host", url: "https://", wantErr: "no host"},
		{name: "path", url: "https://api.example.com/api", wantErr: "path"},
		{name: "query", url: "https://api.example.com/?a=1", wantErr: "query"},
		{name: "bad escape", url: "https://api.example.com/%zz", wantErr: "base URL"},
		{name: "key without secret", url: "https://h", key: "k", wantErr: "together"},
		{name: "secret without key", url: "https://h", secret: "s", wantErr: "together"},
		{name: "nil http client", url: "https://h", opts: []Option{WithHTTPClient(nil)}, wantErr: "nil http client"},
		{name: "nil clock", url: "https://h", opts: []Option{WithClock(nil)}, wantErr: "nil clock"},
		{name: "zero timeout", url: "https://h", opts: []Option{WithTimeout(0)}, wantErr: "timeout"},
		{name: "negative retry", url: "https://h", opts: []Option{WithRetry(RetryPolicy{MaxAttempts: -1})}, wantErr: "negative"},
		{name: "max below base delay", url: "https://h", opts: []Option{WithRetry(RetryPolicy{BaseDelay: time.Second, MaxDelay: time.Millisecond})}, wantErr: "below base"},
		{name: "negative rate", url: "https://h", opts: []Option{WithRateLimit(-1, 1)}, wantErr: "rate limit"},
		{name: "zero burst", url: "https://h", opts: []Option{WithRateLimit(5, 0)}, wantErr: "burst"},
		{name: "market positions path", url: "https://h", opts: []Option{WithPositionsPath("/v1/market/positions")}, wantErr: "positions path"},
		{name: "relative positions path", url: "https://h", opts: []Option{WithPositionsPath("positions")}, wantErr: "positions path"},
		{name: "negative sync", url: "https://h", opts: []Option{WithClockSync(-time.Second)}, wantErr: "clock sync"},
		{name: "nil jitter", url: "https://h", opts: []Option{WithJitter(nil)}, wantErr: "jitter"},
		{name: "nil logger and hook ok", url: "https://h", opts: []Option{WithLogger(nil), WithRequestHook(nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(tt.url, tt.key, tt.secret, tt.opts...)
			if tt.wantErr == "" {
				if err != nil || c == nil {
					t.Fatalf("New = %v, %v; want a client", c, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	t.Parallel()
	c, err := New("https://api.example.com", "k", "s")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.retry, (RetryPolicy{MaxAttempts: 4, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second, MaxElapsed: 20 * time.Second}); got != want {
		t.Errorf("retry = %+v, want %+v", got, want)
	}
	if c.limiter == nil || c.limiter.Limit() != 10 || c.limiter.Burst() != 20 {
		t.Errorf("limiter = %+v, want 10/s burst 20", c.limiter)
	}
	if c.timeout != 10*time.Second || c.syncEvery != 5*time.Minute || c.positionsPath != "/v1/contracts/positions" {
		t.Errorf("timeout %s, sync %s, positions %q", c.timeout, c.syncEvery, c.positionsPath)
	}
	c, err = New("https://api.example.com", "", "", WithRateLimit(0, 0), WithRetry(RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if c.limiter != nil {
		t.Error("WithRateLimit(0, 0) left a limiter")
	}
	if c.retry.MaxAttempts != 1 || c.retry.BaseDelay != 200*time.Millisecond {
		t.Errorf("partial policy = %+v, want MaxAttempts 1 and default delays", c.retry)
	}
}

// The two vectors of issue 2, produced end to end by the client: host with a
// port, query built from the call's arguments, body from Settings.
func TestClientSignsVectors(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	got := map[string]string{}
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get(HeaderSignature)
		mu.Unlock()
		data := `{"hasMore":false,"nextOffsetId":0,"results":[],"range":"202611"}`
		if r.Method == http.MethodPost {
			data = positionJSON
		}
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"success":true,"data":` + data + `}`))}, nil
	})}
	clock := func() time.Time { return time.UnixMilli(1763700000000) }
	c, err := New("https://api.example.com:8443", "k-123", "s3cret", WithHTTPClient(hc), WithClock(clock), WithRateLimit(0, 0))
	if err != nil {
		t.Fatal(err)
	}
	c.synced = true // offset zero, as the vectors assume
	ctx := context.Background()
	if _, err := c.ClosedOrders(ctx, "202611", 0, 50); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetPositionSettings(ctx, "XBTC", Settings{Cross: false, Leverage: 5}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"/v1/contracts/orders/closed":           "50f9a7e4e0255d1018ada2b2ca4790457e4db68346c06dd359b1c3448a3e9a5d",
		"/v1/contracts/positions/XBTC/settings": "d48b6d75370fa9c8ce04ef78af88d9f857a8fb1865f72404baffa268960c3e01",
	}
	for path, w := range want {
		if got[path] != w {
			t.Errorf("%s: signature %s, want %s", path, got[path], w)
		}
	}
}

func TestRequestHook(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var infos []RequestInfo
	hook := WithRequestHook(func(i RequestInfo) {
		mu.Lock()
		infos = append(infos, i)
		mu.Unlock()
	})
	c, mux, _ := setup(t, hook)
	var n atomic.Int32
	mux.HandleFunc("POST /v1/contracts/positions/{symbol}/settings", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		if n.Add(1) == 1 {
			writeFailure(w, http.StatusServiceUnavailable, "BUSY", "", "try again")
			return
		}
		writeData(w, positionJSON)
	})
	if _, err := c.SetPositionSettings(context.Background(), "XBTC", Settings{Leverage: 5}); err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("hook called %d times, want 2: %+v", len(infos), infos)
	}
	for i, want := range []struct {
		status int
		err    bool
	}{{503, true}, {200, false}} {
		got := infos[i]
		if got.Method != "POST" || got.Route != "/v1/contracts/positions/{symbol}/settings" || got.Attempt != i+1 ||
			got.Status != want.status || (got.Err != nil) != want.err || got.Duration <= 0 {
			t.Errorf("attempt %d: %+v", i+1, got)
		}
	}

	// A transport failure reports status 0.
	infos = nil
	c2, err := New("http://127.0.0.1:1", "", "", hook, WithRateLimit(0, 0), WithRetry(RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Indexes(context.Background()); err == nil {
		t.Fatal("call to a closed port succeeded")
	}
	if len(infos) != 1 || infos[0].Status != 0 || infos[0].Err == nil || infos[0].Route != "/v1/market/indexes" {
		t.Errorf("transport failure hook = %+v", infos)
	}
}

func TestPrivateCallWithoutCredentials(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		writeData(w, "1")
	}))
	defer srv.Close()
	c, err := New(srv.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Positions(context.Background()); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("Positions error = %v, want ErrNoCredentials", err)
	}
	if _, err := c.CancelOrders(context.Background(), "XBTC"); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("CancelOrders error = %v, want ErrNoCredentials", err)
	}
	if hits.Load() != 0 {
		t.Errorf("%d requests sent without credentials", hits.Load())
	}
	if _, err := c.IndexValue(context.Background()); err != nil {
		t.Errorf("public call on a key-less client: %v", err)
	}
}

// The secret must not appear in any error, log line or printed client, on
// every failure path.
func TestSecretNeverLeaks(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))

	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/contracts/positions", func(w http.ResponseWriter, r *http.Request) {
		writeFailure(w, http.StatusUnauthorized, "SIGNATURE_INVALID", "API-Signature", "signature mismatch")
	})
	mux.HandleFunc("GET /v1/spots/balances", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1></body></html>")
	})
	mux.HandleFunc("GET /v1/contracts/orders/closed", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"success":true,"data":{"hasMore":`)
	})
	mux.HandleFunc("GET /v1/market/timestamp", func(w http.ResponseWriter, r *http.Request) {
		writeData(w, strconv.FormatInt(time.Now().UnixMilli(), 10))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Credentials in the base URL's user info must not show either.
	base := strings.Replace(srv.URL, "http://", "http://user:"+testSecret+"@", 1)
	opts := []Option{WithLogger(logger), WithRateLimit(0, 0), WithJitter(func() float64 { return 0 })}
	c, err := New(base, testKey, testSecret, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c.sleep = (&sleepRecorder{}).sleep
	closed, err := New("http://user:"+testSecret+"@127.0.0.1:1", testKey, testSecret, opts...)
	if err != nil {
		t.Fatal(err)
	}
	closed.sleep = c.sleep
	closed.synced = true

	ctx := context.Background()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var errs []error
	_, err = c.Positions(ctx)
	errs = append(errs, err)
	_, err = c.SpotBalances(ctx)
	errs = append(errs, err)
	_, err = c.ClosedOrders(ctx, "202611", 0, 10)
	errs = append(errs, err)
	_, err = closed.Positions(ctx)
	errs = append(errs, err)
	_, err = c.CancelOrders(cancelled, "XBTC")
	errs = append(errs, err)
	_, err = New("http://user:"+testSecret+"@h/path", testKey, testSecret)
	errs = append(errs, err)
	_, err = New("ftp://user:"+testSecret+"@h", testKey, testSecret)
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Errorf("failure path %d: no error", i)
			continue
		}
		if strings.Contains(err.Error(), testSecret) || strings.Contains(fmt.Sprintf("%+v", err), testSecret) {
			t.Errorf("failure path %d: error leaks the secret: %v", i, err)
		}
	}
	logMu.Lock()
	out := logs.String()
	logMu.Unlock()
	if !strings.Contains(out, "retrying") {
		t.Errorf("expected retry log lines, got:\n%s", out)
	}
	if strings.Contains(out, testSecret) {
		t.Errorf("log leaks the secret:\n%s", out)
	}
	for _, s := range []string{fmt.Sprintf("%v", c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c)} {
		if strings.Contains(s, testSecret) {
			t.Errorf("printed client leaks the secret: %s", s)
		}
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestSanitizeURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://api.example.com/v1/x?range=202611&limit=5", "https://api.example.com/v1/x?limit=5&range=202611"},
		{"https://u:p@api.example.com/v1/x", "https://REDACTED@api.example.com/v1/x"},
		{"https://h/v1/x?api_key=abc&secret=def&access_token=ghi&signature=jkl&a=1", "https://h/v1/x?a=1&access_token=REDACTED&api_key=REDACTED&secret=REDACTED&signature=REDACTED"},
		{"https://h/v1/x?%zz=secret", "https://h/v1/x?REDACTED"},
	}
	for _, tt := range tests {
		if got := sanitizeRawURL(tt.in); got != tt.want {
			t.Errorf("sanitizeRawURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := sanitizeURL(nil); got != "" {
		t.Errorf("sanitizeURL(nil) = %q", got)
	}
}
