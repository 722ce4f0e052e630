package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// marketPrefix starts every public path; those calls carry no auth headers.
const marketPrefix = "/v1/market/"

// maxBody bounds how much of an answer is read.
const maxBody = 16 << 20

// Client is a client of the exchange's REST interface (spec 4, 5). It is safe
// for concurrent use.
//
// The API secret is not a field: it is captured by the signing function, so
// printing a Client (%+v, %#v) cannot reveal it.
type Client struct {
	base          *url.URL
	key           string
	sign          func(SigningInput) string // nil without a key pair
	hc            *http.Client
	now           func() time.Time
	timeout       time.Duration
	retry         RetryPolicy
	ratePerSec    float64
	rateBurst     int
	limiter       *rate.Limiter // nil: unlimited
	positionsPath string
	orderPath     string // with {symbol}
	clientIDField string // the order's client order id field; "" sends none
	syncEvery     time.Duration
	log           *slog.Logger
	hook          func(RequestInfo)
	jitter        func() float64
	// sleep waits between retries; tests replace it to run without delay.
	sleep func(ctx context.Context, d time.Duration) error

	syncSem chan struct{} // one clock measurement at a time

	mu       sync.Mutex
	offset   time.Duration // server time minus local time
	synced   bool          // offset has been measured once
	syncedAt time.Time     // local time of the last measurement
	syncDue  time.Time     // local time after which the offset is refreshed; zero: never
}

// Option configures a Client in New. An option that gets an invalid value
// makes New fail.
type Option func(*Client) error

// RequestInfo describes one attempt of a call, for metrics (WithRequestHook).
type RequestInfo struct {
	Method string
	// Route is the path template, e.g.
	// "/v1/contracts/positions/{symbol}/settings", so metrics have bounded
	// cardinality.
	Route string
	// Status is the HTTP status, 0 when no answer arrived.
	Status   int
	Attempt  int // 1-based
	Duration time.Duration
	Err      error
}

// New returns a client for the exchange at baseURL (scheme http or https, a
// host, no path, query or fragment). key and secret may both be empty for a
// client of the public market endpoints only; its private calls then fail
// with ErrNoCredentials.
func New(baseURL, key, secret string, opts ...Option) (*Client, error) {
	if err := CheckBaseURL(baseURL); err != nil {
		return nil, err
	}
	u, _ := url.Parse(baseURL)
	if (key == "") != (secret == "") {
		return nil, errors.New("api key and secret must be given together")
	}
	c := &Client{
		base: &url.URL{Scheme: u.Scheme, User: u.User, Host: u.Host},
		key:  key,
		hc: &http.Client{
			// A redirect would carry the signed headers to another place;
			// an API answer is never a redirect.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now:           time.Now,
		timeout:       10 * time.Second,
		retry:         DefaultRetryPolicy(),
		ratePerSec:    10,
		rateBurst:     20,
		positionsPath: "/v1/contracts/positions",
		orderPath:     DefaultOrderPath,
		syncEvery:     5 * time.Minute,
		log:           slog.New(slog.DiscardHandler),
		hook:          func(RequestInfo) {},
		jitter:        rand.Float64,
		sleep:         sleepCtx,
		syncSem:       make(chan struct{}, 1),
	}
	if secret != "" {
		c.sign = func(in SigningInput) string { return Sign(secret, in) }
	}
	for _, opt := range opts {
		if err := opt(c); err != nil {
			return nil, fmt.Errorf("new client: %w", err)
		}
	}
	if c.ratePerSec > 0 {
		c.limiter = rate.NewLimiter(rate.Limit(c.ratePerSec), c.rateBurst)
	}
	return c, nil
}

// WithHTTPClient sets the HTTP client (transport, proxies, TLS). Its own
// Timeout, if any, applies on top of the per-attempt timeout. The default
// client does not follow redirects, so signed headers never travel to
// another address; a client given here decides that itself.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("nil http client")
		}
		c.hc = hc
		return nil
	}
}

// WithClock sets the local wall clock. Signed timestamps are this clock plus
// the measured server offset.
func WithClock(now func() time.Time) Option {
	return func(c *Client) error {
		if now == nil {
			return errors.New("nil clock")
		}
		c.now = now
		return nil
	}
}

// WithTimeout bounds each attempt, from sending to the end of the body.
// Default 10s.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) error {
		if d <= 0 {
			return fmt.Errorf("timeout %s: must be positive", d)
		}
		c.timeout = d
		return nil
	}
}

// WithRetry sets the retry policy; zero fields keep their defaults.
func WithRetry(p RetryPolicy) Option {
	return func(c *Client) error {
		p, err := p.withDefaults()
		if err != nil {
			return err
		}
		c.retry = p
		return nil
	}
}

// WithRateLimit limits the client to perSecond requests (attempts) per
// second with the given burst. Default 10/s, burst 20; perSecond 0 disables
// the limiter.
func WithRateLimit(perSecond float64, burst int) Option {
	return func(c *Client) error {
		if perSecond < 0 || perSecond != perSecond {
			return fmt.Errorf("rate limit %v: must be zero or positive", perSecond)
		}
		if perSecond > 0 && burst < 1 {
			return fmt.Errorf("rate limit burst %d: must be at least 1", burst)
		}
		c.ratePerSec, c.rateBurst = perSecond, burst
		return nil
	}
}

// WithPositionsPath sets the path of the positions listing, which the spec
// does not show (default "/v1/contracts/positions"). It must be a signed
// path: under /v1/ but not /v1/market/.
func WithPositionsPath(path string) Option {
	return func(c *Client) error {
		if !strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, marketPrefix) || strings.ContainsAny(path, "?#") {
			return fmt.Errorf("positions path %q: must start with /v1/, not be a market path, and have no query", path)
		}
		c.positionsPath = path
		return nil
	}
}

// WithClockSync sets how old the measured server clock offset may get before
// a signed call refreshes it (default 5m); 0 measures it once.
func WithClockSync(interval time.Duration) Option {
	return func(c *Client) error {
		if interval < 0 {
			return fmt.Errorf("clock sync interval %s: must not be negative", interval)
		}
		c.syncEvery = interval
		return nil
	}
}

// WithLogger sets the logger for attempts and retries; nil discards. Lines
// never carry the secret, the key or signed headers.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		if l == nil {
			l = slog.New(slog.DiscardHandler)
		}
		c.log = l
		return nil
	}
}

// WithRequestHook calls f once per attempt, after it ends, for metrics. f
// must be safe for concurrent use and return quickly.
func WithRequestHook(f func(RequestInfo)) Option {
	return func(c *Client) error {
		if f == nil {
			f = func(RequestInfo) {}
		}
		c.hook = f
		return nil
	}
}

// WithJitter sets the source of backoff jitter, a value in [0, 1); tests
// pass a constant.
func WithJitter(rand func() float64) Option {
	return func(c *Client) error {
		if rand == nil {
			return errors.New("nil jitter source")
		}
		c.jitter = rand
		return nil
	}
}

// call is one logical request; do turns it into one or more attempts.
type call struct {
	method string
	route  string // path template, for errors, logs and metrics
	path   string // escaped path
	query  url.Values
	body   []byte
	// once: the call is not idempotent (an order), so it is sent again
	// only after an answer that says it was not processed (429).
	once bool
	// timing, when set, receives the local send and receive times of the
	// successful attempt (clock sync).
	timing *timing
}

type timing struct{ sent, received time.Time }

// get is do for a GET without a body.
func (c *Client) get(ctx context.Context, route, path string, query url.Values, v any) error {
	return c.do(ctx, call{method: http.MethodGet, route: route, path: path, query: query}, v)
}

// newRequest builds one attempt of cl: URL, headers and, outside
// /v1/market/, the signature over exactly what is sent with a fresh
// timestamp (local clock plus server offset).
func (c *Client) newRequest(ctx context.Context, cl call) (*http.Request, error) {
	p, err := url.PathUnescape(cl.path)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", cl.path, err)
	}
	u := &url.URL{Scheme: c.base.Scheme, User: c.base.User, Host: c.base.Host, Path: p, RawPath: cl.path}
	if len(cl.query) > 0 {
		u.RawQuery = cl.query.Encode()
	}
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cl.method, cl.route, sanitizeTransportError(err))
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "riskguard")
	if cl.method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(cl.path, marketPrefix) {
		return req, nil
	}
	if c.sign == nil {
		return nil, ErrNoCredentials
	}
	ts := c.serverNow()
	sig := c.sign(SigningInput{
		Method: cl.method,
		Host:   req.URL.Host, // the signer drops the port
		// Unencoded, like the query values in the signed text (spec 5
		// says "request path" only); the same for plain symbol names.
		Path:      req.URL.Path,
		RawQuery:  req.URL.RawQuery,
		Body:      cl.body,
		Key:       c.key,
		Timestamp: ts,
	})
	req.Header.Set(HeaderKey, c.key)
	req.Header.Set(HeaderSignatureMethod, SignatureMethod)
	req.Header.Set(HeaderSignatureVersion, SignatureVersion)
	req.Header.Set(HeaderTimestamp, TimestampMillis(ts))
	req.Header.Set(HeaderSignature, sig)
	return req, nil
}

// outcome is the result of one attempt.
type outcome struct {
	err        error
	status     int
	retry      bool          // worth another attempt
	retryAfter time.Duration // the server's Retry-After, 0 if none
}

// do performs cl with retries and decodes the envelope's data into v (see
// decodeEnvelope). Private calls first make sure the clock offset is fresh.
// When ctx is done it returns ctx.Err().
func (c *Client) do(ctx context.Context, cl call, v any) error {
	if !strings.HasPrefix(cl.path, marketPrefix) {
		if c.sign == nil {
			return ErrNoCredentials
		}
		if err := c.ensureClock(ctx); err != nil {
			return err
		}
	}
	start := c.now()
	remeasured := false
	for attempt := 1; ; attempt++ {
		if err := c.waitTurn(ctx); err != nil {
			return err
		}
		o := c.attempt(ctx, cl, attempt, v)
		if o.err == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !o.retry && o.status == http.StatusUnauthorized && !remeasured && !strings.HasPrefix(cl.path, marketPrefix) {
			// A clock that jumped since the last measurement makes every
			// signed call fail until the next one is due: measure now.
			remeasured = true
			if c.remeasure(ctx) {
				continue
			}
		}
		if !o.retry || (cl.once && o.status != http.StatusTooManyRequests) {
			return o.err
		}
		if attempt >= c.retry.MaxAttempts {
			return c.giveUp(o, attempt)
		}
		delay := c.retry.backoff(attempt, c.jitter)
		if o.retryAfter > 0 {
			delay = o.retryAfter
		}
		if c.now().Sub(start)+delay > c.retry.MaxElapsed {
			return c.giveUp(o, attempt)
		}
		c.log.Warn("exchange request failed, retrying",
			"method", cl.method, "route", cl.route, "status", o.status, "attempt", attempt, "delay", delay, "err", o.err)
		if err := c.sleep(ctx, delay); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
	}
}

// giveUp is the error of a call whose retry budget is spent.
func (c *Client) giveUp(o outcome, attempts int) error {
	var ae *APIError
	if o.status == http.StatusTooManyRequests {
		if !errors.As(o.err, &ae) {
			ae = nil
			var re *ResponseError
			if errors.As(o.err, &re) {
				ae = &APIError{Status: re.Status, Method: re.Method, Route: re.Route, Message: re.Snippet}
			}
		}
		return &RateLimitError{RetryAfter: o.retryAfter, APIError: ae}
	}
	return fmt.Errorf("giving up after %d attempts: %w", attempts, o.err)
}

// waitTurn waits for the rate limiter. A wait that cannot end before ctx's
// deadline fails at once, as context.DeadlineExceeded.
func (c *Client) waitTurn(ctx context.Context) error {
	if c.limiter == nil {
		return ctx.Err()
	}
	if err := c.limiter.Wait(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("rate limiter: %v: %w", err, context.DeadlineExceeded)
	}
	return nil
}

// attempt sends one request of cl and decodes the answer into v.
func (c *Client) attempt(ctx context.Context, cl call, n int, v any) (o outcome) {
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	began := time.Now()
	defer func() {
		d := time.Since(began)
		c.hook(RequestInfo{Method: cl.method, Route: cl.route, Status: o.status, Attempt: n, Duration: d, Err: o.err})
		c.log.Debug("exchange request", "method", cl.method, "route", cl.route, "status", o.status, "attempt", n, "duration", d, "err", o.err)
	}()

	req, err := c.newRequest(actx, cl)
	if err != nil {
		return outcome{err: err}
	}
	sent := c.now()
	resp, err := c.hc.Do(req)
	var body []byte
	if err == nil {
		o.status = resp.StatusCode
		body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
		resp.Body.Close()
	}
	received := c.now()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			o.err = ctx.Err()
		case actx.Err() != nil:
			o.err = fmt.Errorf("%s %s: no complete answer within %s", cl.method, cl.route, c.timeout)
		default:
			o.err = fmt.Errorf("%s %s: %w", cl.method, cl.route, sanitizeTransportError(err))
		}
		o.retry = true
		return o
	}
	if len(body) > maxBody {
		o.err = &ResponseError{Status: resp.StatusCode, Method: cl.method, Route: cl.route, Snippet: snippet(body), Err: fmt.Errorf("body exceeds %d bytes", maxBody)}
		return o
	}
	o.err = decodeEnvelope(resp.StatusCode, body, cl.method, cl.route, v)
	if o.err == nil {
		if cl.timing != nil {
			*cl.timing = timing{sent: sent, received: received}
		}
		return o
	}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		o.retry = true
		if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), c.serverNow()); ok {
			o.retryAfter = d
		}
	}
	return o
}

// serverNow is the local clock corrected by the measured offset.
func (c *Client) serverNow() time.Time {
	c.mu.Lock()
	off := c.offset
	c.mu.Unlock()
	return c.now().Add(off)
}

// ClockOffset returns the last measured offset of the server clock against
// the local one (server minus local); zero before the first measurement.
func (c *Client) ClockOffset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// clockRetryAfterFailure is how soon a failed refresh of the offset is
// tried again (at most the sync interval), so an outage of the timestamp
// endpoint does not add a full retry cycle to every signed call.
const clockRetryAfterFailure = 30 * time.Second

// ensureClock measures the offset before the first signed call and
// refreshes it when due. A failed first measurement fails the call; a failed
// refresh keeps the previous offset and is logged.
func (c *Client) ensureClock(ctx context.Context) error {
	if !c.clockDue() {
		return nil
	}
	select {
	case c.syncSem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.syncSem }()
	if !c.clockDue() { // measured by another call meanwhile
		return nil
	}
	err := c.SyncClock(ctx)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.synced {
		return err
	}
	wait := clockRetryAfterFailure
	if c.syncEvery > 0 {
		wait = min(wait, c.syncEvery)
	}
	c.syncDue = c.now().Add(wait)
	c.log.Warn("exchange clock refresh failed, keeping the previous offset", "offset", c.offset, "err", err)
	return nil
}

// remeasureAfterRefusal is how old the clock offset must be before a
// refused (401) signed call measures it again: a wrong secret then costs at
// most one timestamp call this often, not a storm.
const remeasureAfterRefusal = 5 * time.Second

// remeasureMinShift is how far the offset must have moved for the refused
// call to be tried again at once.
const remeasureMinShift = 500 * time.Millisecond

// remeasure measures the clock offset again after the exchange refused a
// signed call, unless it was measured within remeasureAfterRefusal. It
// reports whether the offset moved enough that the call is worth another
// attempt.
func (c *Client) remeasure(ctx context.Context) bool {
	c.mu.Lock()
	recent := c.synced && c.now().Sub(c.syncedAt) < remeasureAfterRefusal
	prev := c.offset
	c.mu.Unlock()
	if recent {
		return false
	}
	select {
	case c.syncSem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	defer func() { <-c.syncSem }()
	if err := c.SyncClock(ctx); err != nil {
		c.log.Warn("exchange clock measurement after a refused call failed", "err", err)
		return false
	}
	moved := c.ClockOffset() - prev
	if moved.Abs() < remeasureMinShift {
		return false
	}
	c.log.Warn("the exchange refused a signed call and its clock had moved against ours; offset measured again",
		"offset", c.ClockOffset(), "moved", moved)
	return true
}

func (c *Client) clockDue() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.synced || (!c.syncDue.IsZero() && !c.now().Before(c.syncDue))
}

// SyncClock measures the server clock offset now: server time minus the
// local midpoint of the request's send and receive times. Signed calls do
// this on their own when the offset is missing or stale.
func (c *Client) SyncClock(ctx context.Context) error {
	server, tm, err := c.serverTime(ctx)
	if err != nil {
		return fmt.Errorf("sync clock: %w", err)
	}
	mid := tm.sent.Add(tm.received.Sub(tm.sent) / 2)
	off := server.Sub(mid)
	c.mu.Lock()
	c.offset = off
	c.synced = true
	c.syncedAt = tm.received
	c.syncDue = time.Time{}
	if c.syncEvery > 0 {
		c.syncDue = tm.received.Add(c.syncEvery)
	}
	c.mu.Unlock()
	c.log.Debug("exchange clock synced", "offset", off, "rtt", tm.received.Sub(tm.sent))
	return nil
}

// CheckBaseURL refuses a base URL the client cannot use: a scheme other
// than http or https, no host, a path (the signed path must start with
// /v1/), a query or a fragment. The configuration's loader asks it too, so
// that check refuses what run would.
func CheckBaseURL(baseURL string) error {
	u, err := url.Parse(baseURL)
	if err != nil {
		return fmt.Errorf("base URL: %w", sanitizeTransportError(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("base URL %s: scheme must be http or https", sanitizeURL(u))
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("base URL %s: no host", sanitizeURL(u))
	case u.Path != "" && u.Path != "/":
		return fmt.Errorf("base URL %s: a path is not supported, the signed path must start with /v1/", sanitizeURL(u))
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("base URL %s: no query or fragment allowed", sanitizeURL(u))
	}
	return nil
}
