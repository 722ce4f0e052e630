package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/exchange"
)

// Error codes the exchange answers with; /v1/market/errorCodes lists them.
const (
	CodeParameterInvalid    = "PARAMETER_INVALID"
	CodeAPIKeyInvalid       = "API_KEY_INVALID"
	CodeSignatureInvalid    = "SIGNATURE_INVALID"
	CodeTimestampExpired    = "TIMESTAMP_EXPIRED"
	CodeSymbolNotFound      = "SYMBOL_NOT_FOUND"
	CodeIndexNotFound       = "INDEX_NOT_FOUND"
	CodeInsufficientBalance = "INSUFFICIENT_BALANCE"
	CodeInsufficientMargin  = "INSUFFICIENT_MARGIN"
	CodeNotFound            = "NOT_FOUND"
	CodeMethodNotAllowed    = "METHOD_NOT_ALLOWED"
	CodeRateLimited         = "RATE_LIMITED"
	CodeInternalError       = "INTERNAL_ERROR"
	CodeServiceUnavailable  = "SERVICE_UNAVAILABLE"
	CodeForbidden           = "FORBIDDEN"
)

// errorCodes is the catalogue served by /v1/market/errorCodes.
func errorCodes() map[string]string {
	return map[string]string{
		CodeParameterInvalid:    "A request parameter, header or body field is missing or invalid; errorField names it.",
		CodeAPIKeyInvalid:       "The API key is missing or unknown, or an authentication header is missing.",
		CodeSignatureInvalid:    "The request signature does not match, or the signature method or version is not supported.",
		CodeTimestampExpired:    "API-TIMESTAMP is not an integer or is too far from the server time.",
		CodeSymbolNotFound:      "No symbol of that name.",
		CodeIndexNotFound:       "No index of that name.",
		CodeInsufficientBalance: "The free balance cannot cover the margin the change needs.",
		CodeInsufficientMargin:  "The change would put the liquidation price past the current index price.",
		CodeNotFound:            "No such endpoint.",
		CodeMethodNotAllowed:    "The endpoint does not accept this method.",
		CodeRateLimited:         "Too many requests; retry after the delay in Retry-After.",
		CodeInternalError:       "Internal error; retry later.",
		CodeServiceUnavailable:  "Service unavailable; retry later.",
		CodeForbidden:           "The API key is valid but not permitted to make this call; allow it in the key's settings.",
		CodeReduceOnlyRejected:  "A reduce-only order would not reduce the position: no position, the side that grows it, or more than it holds.",
	}
}

// maxBody bounds a request body.
const maxBody = 1 << 20

// route is one endpoint.
type route struct {
	method   string
	template string
	segs     []string
	private  bool
	handle   func(*request) response
}

// request is what a handler sees. Handlers run with e.mu held.
type request struct {
	params map[string]string
	query  url.Values
	body   []byte
	now    time.Time // server clock
}

// response is a handler's answer.
type response struct {
	status      int
	body        []byte
	contentType string
	retryAfter  time.Duration
	truncate    bool
}

// apiError is a failure answered with the error envelope.
type apiError struct {
	status             int
	code, field, cause string
}

func (a *apiError) response() response {
	b, _ := json.Marshal(exchange.Envelope{Success: false, Error: a.code, ErrorField: a.field, ErrorMessage: a.cause})
	return response{status: a.status, body: b}
}

func fail(status int, code, field, format string, args ...any) response {
	return (&apiError{status: status, code: code, field: field, cause: fmt.Sprintf(format, args...)}).response()
}

func invalid(field, format string, args ...any) response {
	return fail(http.StatusBadRequest, CodeParameterInvalid, field, format, args...)
}

// success wraps data in a success envelope.
func success(data any) response {
	b, err := json.Marshal(struct {
		Success bool `json:"success"`
		Data    any  `json:"data"`
	}{true, data})
	if err != nil {
		return fail(http.StatusInternalServerError, CodeInternalError, "", "encode response: %v", err)
	}
	return response{status: http.StatusOK, body: b}
}

// table lists the endpoints; a literal segment is listed before a
// parameter at the same place so that it wins.
func (e *Exchange) table() []route {
	rs := []route{
		{method: http.MethodGet, template: "/v1/market/trades", handle: e.trades},
		{method: http.MethodGet, template: "/v1/market/timestamp", handle: e.timestamp},
		{method: http.MethodGet, template: "/v1/market/ticks/{symbol}", handle: e.ticks},
		{method: http.MethodGet, template: "/v1/market/prices", handle: e.prices},
		{method: http.MethodGet, template: "/v1/market/bars/{symbol}/{type}", handle: e.bars},
		{method: http.MethodGet, template: "/v1/market/orderBook/{symbol}", handle: e.orderBook},
		{method: http.MethodGet, template: "/v1/market/indexes", handle: e.indexList},
		{method: http.MethodGet, template: "/v1/market/indexes/indexValue", handle: e.indexValue},
		{method: http.MethodGet, template: "/v1/market/indexes/{name}", handle: e.indexHistory},
		{method: http.MethodGet, template: "/v1/market/indexPrices", handle: e.indexPrices},
		{method: http.MethodGet, template: "/v1/market/errorCodes", handle: e.errorCodes},
		{method: http.MethodGet, template: "/v1/contracts/orders/closed", private: true, handle: e.closedOrders},
		{method: http.MethodGet, template: positionsRoute, private: true, handle: e.positionsList},
		{method: http.MethodPost, template: settingsRoute, private: true, handle: e.settings},
		{method: http.MethodGet, template: "/v1/spots/balances", private: true, handle: e.spotBalancesList},
		{method: http.MethodPost, template: cancelRoute, private: true, handle: e.cancel},
		{method: http.MethodPost, template: orderRoute, private: true, handle: e.order},
	}
	for i := range rs {
		rs[i].segs = strings.Split(rs[i].template, "/")
	}
	return rs
}

// Routes returns the path templates the exchange serves, for fault
// injection.
func (e *Exchange) Routes() []string {
	out := make([]string, len(e.routes))
	for i, r := range e.routes {
		out[i] = r.template
	}
	return out
}

// match finds the route of a path. With no route for the method it
// returns the methods the path accepts.
func (e *Exchange) match(method, path string) (*route, map[string]string, []string) {
	segs := strings.Split(path, "/")
	var allowed []string
	for i := range e.routes {
		rt := &e.routes[i]
		params, ok := matchSegs(rt.segs, segs)
		if !ok {
			continue
		}
		if rt.method != method {
			allowed = append(allowed, rt.method)
			continue
		}
		return rt, params, nil
	}
	return nil, nil, allowed
}

func matchSegs(tmpl, segs []string) (map[string]string, bool) {
	if len(tmpl) != len(segs) {
		return nil, false
	}
	var params map[string]string
	for i, t := range tmpl {
		if strings.HasPrefix(t, "{") {
			if segs[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[t[1:len(t)-1]] = segs[i]
			continue
		}
		if t != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// ServeHTTP answers one request of the exchange API.
func (e *Exchange) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	began := time.Now()
	res, routeName := e.serve(w, r)
	if res.status == 0 { // the client went away during injected latency
		e.log.Info("request", "method", r.Method, "path", r.URL.Path, "route", routeName,
			"status", 0, "duration", time.Since(began), "err", r.Context().Err())
		return
	}
	h := w.Header()
	ct := res.contentType
	if ct == "" {
		ct = "application/json"
	}
	h.Set("Content-Type", ct)
	if res.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(math.Ceil(res.retryAfter.Seconds()))))
	}
	body := res.body
	if res.truncate {
		// Declare the whole body and send half: the client sees the
		// connection end early.
		h.Set("Content-Length", strconv.Itoa(len(body)))
		body = body[:len(body)/2]
	}
	w.WriteHeader(res.status)
	_, _ = w.Write(body)
	e.log.Info("request", "method", r.Method, "path", r.URL.Path, "route", routeName,
		"status", res.status, "duration", time.Since(began))
}

// serve computes the answer to a request and records the call.
func (e *Exchange) serve(w http.ResponseWriter, r *http.Request) (response, string) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	rt, params, allowed := e.match(r.Method, r.URL.Path)
	routeName := ""
	if rt != nil {
		routeName = rt.template
	}
	var res response
	switch {
	case err != nil:
		res = fail(http.StatusRequestEntityTooLarge, CodeParameterInvalid, "body", "request body unreadable or over %d bytes", maxBody)
	case rt == nil && len(allowed) > 0:
		res = fail(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "", "%s is not allowed on %s; use %s", r.Method, r.URL.Path, strings.Join(allowed, ", "))
	case rt == nil:
		res = fail(http.StatusNotFound, CodeNotFound, "", "no endpoint %s", r.URL.Path)
	default:
		e.mu.Lock()
		f := e.takeFault(rt.template, r.URL.Path)
		e.mu.Unlock()
		if f != nil && f.Latency > 0 {
			t := time.NewTimer(f.Latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				e.mu.Lock()
				e.record(r, routeName, 0, body)
				e.mu.Unlock()
				return response{}, routeName
			}
		}
		e.mu.Lock()
		res = e.answer(r, rt, params, body, f)
		e.mu.Unlock()
	}
	e.mu.Lock()
	e.record(r, routeName, res.status, body)
	e.mu.Unlock()
	return res, routeName
}

// record appends a call to the request log. Call with e.mu held.
func (e *Exchange) record(r *http.Request, routeName string, status int, body []byte) {
	if len(e.calls) >= maxCalls {
		e.calls = append(e.calls[:0], e.calls[len(e.calls)-maxCalls/2:]...)
	}
	e.calls = append(e.calls, Call{
		Time:     e.now(),
		Method:   r.Method,
		Path:     r.URL.Path,
		Route:    routeName,
		Status:   status,
		Mutating: r.Method == http.MethodPost,
		Body:     string(body),
	})
}

// answer runs a matched request through faults, authentication and its
// handler. Call with e.mu held.
func (e *Exchange) answer(r *http.Request, rt *route, params map[string]string, body []byte, f *Fault) response {
	if f != nil {
		if res, done := f.response(); done {
			return res
		}
	}
	now := e.now()
	if rt.private {
		if a := e.authenticate(r, body, now); a != nil {
			return a.response()
		}
		if e.forbidden[rt.template] {
			return fail(http.StatusForbidden, CodeForbidden, "", "the API key is not permitted to call %s %s", rt.method, rt.template)
		}
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return fail(http.StatusUnsupportedMediaType, CodeParameterInvalid, "Content-Type",
				"a POST must have Content-Type application/json")
		}
	}
	key := r.Method + " " + r.URL.Path + "?" + r.URL.RawQuery
	if f != nil && f.Stale {
		if old, ok := e.answers[key]; ok {
			return old.res
		}
	}
	if f != nil && f.NotApplied && rt.template == settingsRoute {
		return e.positionAnswer(params["symbol"])
	}
	if e.lagging != nil && rt.template == positionsRoute {
		return e.laggingListing()
	}
	var before response
	if f != nil && f.ListingLags > 0 && rt.template == orderRoute {
		before = e.positionsList(nil) // what the listing shows for its next reads
	}
	var res response
	if f != nil && f.Grows && rt.template == orderRoute {
		res = e.grownOrder(&request{params: params, query: r.URL.Query(), body: body, now: now})
	} else {
		res = rt.handle(&request{params: params, query: r.URL.Query(), body: body, now: now})
	}
	if f != nil && f.ListingLags > 0 && rt.template == orderRoute && res.status == http.StatusOK {
		e.lagging = &lagged{res: before, reads: f.ListingLags}
	}
	if r.Method == http.MethodGet && res.status == http.StatusOK {
		if len(e.answers) >= maxAnswers {
			clear(e.answers)
		}
		e.answers[key] = answer{res: res}
	}
	if f != nil && f.LeaveOutEmpty && rt.template == positionsRoute && res.status == http.StatusOK {
		res = e.openPositionsList()
	}
	if f != nil && res.status == http.StatusOK {
		if f.Empty {
			res.body = emptied(res.body)
		}
		if f.Item != nil {
			res.body = f.Item.apply(res.body)
		}
	}
	if f != nil && f.Truncated {
		res.truncate = true
	}
	return res
}

// authenticate checks the key, timestamp and signature of a private
// request. Call with e.mu held.
func (e *Exchange) authenticate(r *http.Request, body []byte, now time.Time) *apiError {
	unauthorized := func(code, field, format string, args ...any) *apiError {
		return &apiError{status: http.StatusUnauthorized, code: code, field: field, cause: fmt.Sprintf(format, args...)}
	}
	h := r.Header
	for _, name := range []string{exchange.HeaderKey, exchange.HeaderSignatureMethod, exchange.HeaderSignatureVersion, exchange.HeaderTimestamp, exchange.HeaderSignature} {
		if h.Get(name) == "" {
			return unauthorized(CodeAPIKeyInvalid, name, "missing header %s", name)
		}
	}
	key := h.Get(exchange.HeaderKey)
	if key != e.key {
		return unauthorized(CodeAPIKeyInvalid, exchange.HeaderKey, "unknown API key")
	}
	if m := h.Get(exchange.HeaderSignatureMethod); m != exchange.SignatureMethod {
		return unauthorized(CodeSignatureInvalid, exchange.HeaderSignatureMethod, "signature method %q is not supported; use %s", m, exchange.SignatureMethod)
	}
	if v := h.Get(exchange.HeaderSignatureVersion); v != exchange.SignatureVersion {
		return unauthorized(CodeSignatureInvalid, exchange.HeaderSignatureVersion, "signature version %q is not supported; use %s", v, exchange.SignatureVersion)
	}
	tsText := h.Get(exchange.HeaderTimestamp)
	ms, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return unauthorized(CodeTimestampExpired, exchange.HeaderTimestamp, "API-TIMESTAMP must be integer milliseconds, got %q", tsText)
	}
	ts := time.UnixMilli(ms)
	if skew := now.Sub(ts); skew > e.maxSkew || skew < -e.maxSkew {
		return unauthorized(CodeTimestampExpired, exchange.HeaderTimestamp,
			"API-TIMESTAMP %d is %s from the server time %d; at most %s is accepted", ms, skew.Round(time.Millisecond), now.UnixMilli(), e.maxSkew)
	}
	in := exchange.SigningInput{
		Method:    r.Method,
		Host:      r.Host,
		Path:      r.URL.Path,
		RawQuery:  r.URL.RawQuery,
		Body:      body,
		Key:       key,
		Timestamp: ts,
	}
	if !exchange.VerifySignature(e.secret, in, h.Get(exchange.HeaderSignature)) {
		return unauthorized(CodeSignatureInvalid, exchange.HeaderSignature, "signature does not match the request")
	}
	return nil
}

// maxAnswers bounds the remembered answers that Stale faults replay.
const maxAnswers = 256

// answer is a remembered response, replayed by a Stale fault.
type answer struct{ res response }

// Fault is a failure injected into the answers of a route. Status, Body,
// HTML, Malformed and RetryAfter replace the answer without processing
// the request (a proxy or gateway failing in front of the exchange);
// Stale replays the previous answer of the same GET (same path and query)
// without processing, or processes normally when there is none; Truncated
// processes the request — its effects happen — and cuts the response body
// in half; Latency delays the answer and combines with any of the others.
type Fault struct {
	// Status is the HTTP status; with no Body it comes with an error
	// envelope whose code follows the status (429 RATE_LIMITED, 503
	// SERVICE_UNAVAILABLE, other 5xx INTERNAL_ERROR, 401
	// API_KEY_INVALID, 403 FORBIDDEN, 404 NOT_FOUND, other 4xx
	// PARAMETER_INVALID).
	Status int
	// Body replaces the response body verbatim (status 200 unless set).
	Body string
	// Latency delays the answer (real time; the request's context ends
	// the wait).
	Latency time.Duration
	// Malformed answers with a body that is not JSON (status 200 unless
	// set).
	Malformed bool
	// Truncated cuts the real answer's body in half after declaring its
	// full length.
	Truncated bool
	// HTML answers with a proxy's HTML error page (status 502 unless set).
	HTML bool
	// Stale replays the previous answer.
	Stale bool
	// RetryAfter sets the Retry-After header, in whole seconds rounded up
	// (status 429 unless set).
	RetryAfter time.Duration
	// Empty answers the real request with its data emptied: an array
	// becomes [], an object {} (a valid answer with nothing in it).
	Empty bool
	// Item corrupts one element of the real answer's data, leaving the
	// rest of it as it is.
	Item *ItemFault
	// NotApplied answers a settings call with success and the position as
	// it is, without applying the change (the read-back shows it).
	NotApplied bool
	// Grows answers an order as filled but adds its quantity to the
	// position instead of taking it off: an exchange that ignored
	// REDUCE_ONLY (the guard's read-back must catch it).
	Grows bool
	// LeaveOutEmpty, on the positions listing, leaves the empty
	// positions out of it (a closed or liquidated position is no longer
	// listed, rather than listed empty).
	LeaveOutEmpty bool
	// ListingLags, on the order route, processes the order (it fills)
	// and makes the next ListingLags answers of the positions listing
	// show the account as it was just before it: a read model behind the
	// matching engine, which real venues have.
	ListingLags int
	// Every applies the fault to one call in Every (the Every-th, the
	// 2×Every-th, …) and lets the others pass: an answer that is empty or
	// truncated now and then. 0 or 1: every call.
	Every int
	// Times is how many calls the fault applies to; 0 means until cleared.
	Times int

	seen int // calls of its route so far, for Every
}

// ItemFault sets one value inside a successful answer's data. Path walks
// it by dot-separated steps, an array index or an object key: "1.riskLevel"
// is the riskLevel of a positions answer's second element, "BTC" the BTC
// member of the index prices, "spot.0.baseScale" a field of the first spot
// symbol. Value is raw JSON ("\"x\"", "null", "\"NaN\"").
type ItemFault struct {
	Path  string
	Value string
}

// apply rewrites the success envelope body b; b is returned unchanged when
// the path does not exist.
func (it *ItemFault) apply(b []byte) []byte {
	var env map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&env) != nil {
		return b
	}
	steps := strings.Split(it.Path, ".")
	var v any
	if json.Unmarshal([]byte(it.Value), &v) != nil {
		v = it.Value
	}
	cur := env["data"]
	for i, step := range steps {
		last := i == len(steps)-1
		switch c := cur.(type) {
		case []any:
			n, err := strconv.Atoi(step)
			if err != nil || n < 0 || n >= len(c) {
				return b
			}
			if last {
				c[n] = v
			}
			cur = c[n]
		case map[string]any:
			if _, ok := c[step]; !ok && !last {
				return b
			}
			if last {
				c[step] = v
			}
			cur = c[step]
		default:
			return b
		}
	}
	out, err := json.Marshal(env)
	if err != nil {
		return b
	}
	return out
}

// emptied is the success envelope body b with its data emptied.
func emptied(b []byte) []byte {
	var env map[string]json.RawMessage
	if json.Unmarshal(b, &env) != nil {
		return b
	}
	switch data := bytes.TrimSpace(env["data"]); {
	case len(data) > 0 && data[0] == '[':
		env["data"] = json.RawMessage("[]")
	case len(data) > 0 && data[0] == '{':
		env["data"] = json.RawMessage("{}")
	}
	out, err := json.Marshal(env)
	if err != nil {
		return b
	}
	return out
}

// positionsRoute is the positions listing's path template.
const positionsRoute = "/v1/contracts/positions"

// lagged is a positions listing that lags an order (Fault.ListingLags):
// the answer before the order, for reads more reads.
type lagged struct {
	res   response
	reads int
}

// laggingListing answers a positions read with the listing from before
// the order, counting the read. Call with e.mu held.
func (e *Exchange) laggingListing() response {
	res := e.lagging.res
	e.lagging.reads--
	if e.lagging.reads <= 0 {
		e.lagging = nil
	}
	return res
}

// htmlPage is the body of an HTML fault.
const htmlPage = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// response is the answer of a fault that replaces the real one; done is
// false when the request is to be processed.
func (f *Fault) response() (response, bool) {
	status := f.Status
	var res response
	switch {
	case f.HTML:
		if status == 0 {
			status = http.StatusBadGateway
		}
		res = response{status: status, body: []byte(htmlPage), contentType: "text/html"}
	case f.Malformed:
		if status == 0 {
			status = http.StatusOK
		}
		res = response{status: status, body: []byte(`{"success":true,"data":{"oops"` + "\x00<garbage>")}
	case f.Body != "":
		if status == 0 {
			status = http.StatusOK
		}
		res = response{status: status, body: []byte(f.Body)}
	case status != 0 || f.RetryAfter > 0:
		if status == 0 {
			status = http.StatusTooManyRequests
		}
		res = fail(status, faultCode(status), "", "injected fault: %s", http.StatusText(status))
	default:
		return response{}, false
	}
	res.retryAfter = f.RetryAfter
	res.truncate = f.Truncated
	return res, true
}

func faultCode(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return CodeRateLimited
	case status == http.StatusServiceUnavailable:
		return CodeServiceUnavailable
	case status == http.StatusNotFound:
		return CodeNotFound
	case status == http.StatusUnauthorized:
		return CodeAPIKeyInvalid
	case status == http.StatusForbidden:
		return CodeForbidden
	case status >= 500:
		return CodeInternalError
	}
	return CodeParameterInvalid
}

// InjectFault makes the next f.Times calls of a route fail as f says (all
// of them until ClearFaults when Times is 0). route is a path template as
// listed by Routes ("/v1/contracts/positions/{symbol}/settings"), a
// concrete path ("/v1/contracts/positions/XBTC/settings"), or "*" for every
// route. A fault replaces the previous one on the same route; a concrete
// path goes before its template, and both before "*".
func (e *Exchange) InjectFault(route string, f Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults[route] = &f
}

// ClearFaults removes every injected fault.
func (e *Exchange) ClearFaults() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.faults)
}

// takeFault returns a copy of the fault for a call, counting it. Call with
// e.mu held.
func (e *Exchange) takeFault(template, path string) *Fault {
	for _, k := range []string{path, template, "*"} {
		f, ok := e.faults[k]
		if !ok {
			continue
		}
		if f.Every > 1 {
			f.seen++
			if f.seen%f.Every != 0 {
				return nil
			}
		}
		out := *f
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				delete(e.faults, k)
			}
		}
		return &out
	}
	return nil
}

// jsonField names the offending field of a JSON decoding error: the field
// of a type error, the unknown field, or "body" for a syntax error.
func jsonField(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return te.Field
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		return strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
	}
	return "body"
}
