package sim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

const (
	testKey    = "test-key"
	testSecret = "test-secret"
)

// t0 is the start of every test exchange: mid-month, so the generated
// closed orders (120 hours back) stay in November.
var t0 = time.Date(2026, 11, 15, 12, 0, 0, 0, time.UTC)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// env is a simulated exchange served over real HTTP.
type env struct {
	t     *testing.T
	sim   *sim.Exchange
	srv   *httptest.Server
	clock *clock
}

// newEnv starts the exchange with cfg (key, secret and clock filled in
// when unset) behind an httptest server.
func newEnv(t *testing.T, cfg sim.Config) *env {
	t.Helper()
	c := &clock{t: t0}
	if cfg.Key == "" {
		cfg.Key, cfg.Secret = testKey, testSecret
	}
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	e, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return &env{t: t, sim: e, srv: srv, clock: c}
}

// call is a request to make.
type call struct {
	method, path, query string
	body                string
	// unsigned sends no auth headers.
	unsigned bool
	// key, secret and at override the signing inputs.
	key, secret string
	at          time.Time
	// contentType overrides application/json for a POST; "-" sends none.
	contentType string
	// edit changes the request after signing.
	edit func(*http.Request)
}

// reply is an answer.
type reply struct {
	status int
	header http.Header
	raw    []byte
	env    exchange.Envelope
	// jsonErr is the error decoding raw as an envelope.
	jsonErr error
}

// do sends c to the test server, signing it unless unsigned.
func (v *env) do(c call) reply {
	v.t.Helper()
	u := v.srv.URL + c.path
	if c.query != "" {
		u += "?" + c.query
	}
	var body io.Reader
	if c.body != "" {
		body = bytes.NewReader([]byte(c.body))
	}
	req, err := http.NewRequest(c.method, u, body)
	if err != nil {
		v.t.Fatal(err)
	}
	if c.method == http.MethodPost {
		switch c.contentType {
		case "":
			req.Header.Set("Content-Type", "application/json")
		case "-":
		default:
			req.Header.Set("Content-Type", c.contentType)
		}
	}
	if !c.unsigned {
		sign(req, c)
		if c.key == "" {
			c.key = testKey
		}
	}
	if c.edit != nil {
		c.edit(req)
	}
	res, err := v.srv.Client().Do(req)
	if err != nil {
		v.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		v.t.Fatalf("%s %s: read body: %v", c.method, c.path, err)
	}
	r := reply{status: res.StatusCode, header: res.Header, raw: raw}
	r.jsonErr = json.Unmarshal(raw, &r.env)
	return r
}

// sign adds the auth headers of spec 5 to req.
func sign(req *http.Request, c call) {
	key, secret, at := c.key, c.secret, c.at
	if key == "" {
		key = testKey
	}
	if secret == "" {
		secret = testSecret
	}
	if at.IsZero() {
		at = t0
	}
	var body []byte
	if c.body != "" {
		body = []byte(c.body)
	}
	sig := exchange.Sign(secret, exchange.SigningInput{
		Method:    req.Method,
		Host:      req.URL.Host,
		Path:      req.URL.Path,
		RawQuery:  req.URL.RawQuery,
		Body:      body,
		Key:       key,
		Timestamp: at,
	})
	req.Header.Set(exchange.HeaderKey, key)
	req.Header.Set(exchange.HeaderSignatureMethod, exchange.SignatureMethod)
	req.Header.Set(exchange.HeaderSignatureVersion, exchange.SignatureVersion)
	req.Header.Set(exchange.HeaderTimestamp, exchange.TimestampMillis(at))
	req.Header.Set(exchange.HeaderSignature, sig)
}

// get is a signed GET that must succeed; its data is decoded into out.
func (v *env) get(path, query string, out any) {
	v.t.Helper()
	v.ok(call{method: http.MethodGet, path: path, query: query}, out)
}

// post is a signed POST that must succeed.
func (v *env) post(path, body string, out any) {
	v.t.Helper()
	v.ok(call{method: http.MethodPost, path: path, body: body}, out)
}

// ok sends c, requires a 200 success envelope and decodes its data.
func (v *env) ok(c call, out any) {
	v.t.Helper()
	r := v.do(c)
	if r.status != http.StatusOK || r.jsonErr != nil || !r.env.Success {
		v.t.Fatalf("%s %s: status %d, body %s", c.method, c.path, r.status, r.raw)
	}
	if out != nil {
		if err := json.Unmarshal(r.env.Data, out); err != nil {
			v.t.Fatalf("%s %s: decode %s: %v", c.method, c.path, r.env.Data, err)
		}
	}
}

// wantError checks an error reply.
func wantError(t *testing.T, r reply, status int, code, field string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status = %d, want %d (body %s)", r.status, status, r.raw)
	}
	if r.jsonErr != nil {
		t.Fatalf("body is not an envelope: %v: %s", r.jsonErr, r.raw)
	}
	if r.env.Success || r.env.Error != code || r.env.ErrorField != field || r.env.ErrorMessage == "" {
		t.Errorf("envelope = %+v, want error %s field %q with a message", r.env, code, field)
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// wantDec compares decimals by value.
func wantDec(t *testing.T, what string, got decimal.Decimal, want string) {
	t.Helper()
	if !got.Equal(dec(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}
