package main

// The fault campaign: the daemon runs in-process (the real binary where a
// crash matters) against the simulated exchange over HTTP, sometimes through
// a proxy that breaks connections, rewrites answers or holds them. For each
// fault the guard keeps running, takes no wrong action, says what is wrong
// in its log and audit log, and recovers by itself when the fault ends.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// faultProxy stands between the guard and the simulated exchange. It
// forwards every request unchanged unless told to reset the connections of
// a path, rewrite an answer, or hold an answer the exchange already gave.
// It can go away (its listener closed, connections refused) and come back
// on the same address.
type faultProxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	srv     *http.Server
	reset   map[string]bool // by path: close the connection without answering
	rewrite func(path string, body []byte) []byte
	hold    string        // a path whose answer is held until the client goes away
	held    chan struct{} // receives once per held answer
	// upstream counts, by path, the requests whose forwarding got an
	// answer's headers or is waiting for them at the exchange.
	upstream map[string]int
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	p := &faultProxy{t: t, target: target, reset: map[string]bool{}, held: make(chan struct{}, 16), upstream: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *faultProxy) url() string { return "http://" + p.addr }

func (p *faultProxy) serve(ln net.Listener) {
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	p.mu.Lock()
	p.srv = srv
	p.mu.Unlock()
	go srv.Serve(ln)
}

// down closes the listener and every open connection: the exchange is gone.
func (p *faultProxy) down() {
	p.mu.Lock()
	srv := p.srv
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up listens again on the same address.
func (p *faultProxy) up() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func (p *faultProxy) setReset(path string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reset[path] = on
}

func (p *faultProxy) setRewrite(f func(path string, body []byte) []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewrite = f
}

// atExchange is how many requests to path were forwarded to the exchange.
func (p *faultProxy) atExchange(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream[path]
}

func (p *faultProxy) setHold(path string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = path
}

func (p *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	reset, rewrite, hold := p.reset[r.URL.Path], p.rewrite, p.hold == r.URL.Path
	p.mu.Unlock()
	if reset {
		// A reset, not a clean close: SO_LINGER 0 sends RST.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	out.Host = r.Host // the signature covers the host the client saw
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		p.mu.Lock()
		p.upstream[r.URL.Path]++
		p.mu.Unlock()
	}}
	out = out.WithContext(httptrace.WithClientTrace(out.Context(), trace))
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if hold {
		// The exchange has acted; its answer never reaches the guard.
		p.held <- struct{}{}
		<-r.Context().Done()
		return
	}
	if rewrite != nil {
		body = rewrite(r.URL.Path, body)
	}
	for k, v := range resp.Header {
		if k != "Content-Length" {
			w.Header()[k] = v
		}
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(body)
}

// daemon is `riskguard run` running in-process.
type daemon struct {
	cancel context.CancelFunc
	done   chan int
	logs   *lockedBuffer
	// reload delivers a reload request, as SIGHUP does.
	reload chan os.Signal
}

// start runs the daemon with JSON logs; extra overrides the environment
// (RISKGUARD_EXCHANGE_TIMEOUT, …) on top of the test credentials.
func (g *guardEnv) start(extra map[string]string) *daemon {
	g.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemon{cancel: cancel, done: make(chan int, 1), logs: &lockedBuffer{}, reload: make(chan os.Signal, 1)}
	getenv := func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		return g.env(k)
	}
	m := &Main{Stdout: io.Discard, Stderr: d.logs, Getenv: getenv, Reload: d.reload}
	go func() {
		err := m.Run(ctx, []string{"run", "--config", g.config, "--log-format", "json"})
		var ec exitCode
		switch {
		case err == nil:
			d.done <- 0
		case errors.As(err, &ec):
			d.done <- int(ec)
		default:
			d.done <- -1
		}
	}()
	g.t.Cleanup(func() {
		cancel()
		if g.t.Failed() {
			g.t.Logf("daemon log:\n%s", d.logs.String())
		}
	})
	return d
}

// running fails the test if the daemon has exited.
func (d *daemon) running(t *testing.T) {
	t.Helper()
	select {
	case code := <-d.done:
		d.done <- code
		t.Fatalf("the daemon exited (status %d) during the fault:\n%s", code, d.logs.String())
	default:
	}
}

// stop cancels the daemon and returns its exit status.
func (d *daemon) stop(t *testing.T) int {
	t.Helper()
	d.cancel()
	select {
	case code := <-d.done:
		return code
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon did not stop within 20s")
		return -1
	}
}

// auditLines reads the audit log, ignoring a last line still being written.
func (g *guardEnv) auditLines() []journal.Record {
	g.t.Helper()
	data, err := os.ReadFile(filepath.Join(g.dir, "audit.jsonl"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		g.t.Fatal(err)
	}
	var out []journal.Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r journal.Record
		if json.Unmarshal(sc.Bytes(), &r) == nil {
			out = append(out, r)
		}
	}
	return out
}

// tickErrors returns the errors of the failed ticks in the audit log.
func (g *guardEnv) tickErrors() []string {
	var out []string
	for _, r := range g.auditLines() {
		if r.Type == "tick" && r.Error != "" {
			out = append(out, r.Error)
		}
	}
	return out
}

// campaignEnv is the environment of a campaign daemon: a short timeout and
// one retry, so that a fault shows within a second.
func campaignEnv(baseURL string) map[string]string {
	return map[string]string{
		"RISKGUARD_EXCHANGE_BASE_URL":    baseURL,
		"RISKGUARD_EXCHANGE_TIMEOUT":     "250ms",
		"RISKGUARD_EXCHANGE_MAX_RETRIES": "1",
	}
}

const settingsXSOL = "/v1/contracts/positions/XSOL/settings"

// nearLiqXBTC is nearLiqRule on XBTC only (XSOL starts 3.4% from its
// liquidation price).
var nearLiqXBTC = strings.Replace(nearLiqRule, "    cooldown: 5m\n", "    symbols: [XBTC]\n    cooldown: 5m\n", 1)

// Transport and answer faults on the reads: no action while they last, the
// audit log and the log say what failed, and the pending action (XSOL at
// 15x over a max of 10x) is taken once when the fault ends.
func TestFaultReadsRecover(t *testing.T) {
	t.Parallel()
	const positions, indexes = "/v1/contracts/positions", "/v1/market/indexPrices"
	cases := []struct {
		name   string
		route  string
		fault  sim.Fault
		reset  bool // the proxy resets the route's connections instead
		want   []string
		logged string // a substring of the log while the fault lasts
	}{
		{name: "5xx burst on positions", route: positions, fault: sim.Fault{Status: 503},
			want: []string{"positions", "status 503", "SERVICE_UNAVAILABLE", "giving up after 2 attempts"}, logged: "exchange request failed, retrying"},
		{name: "500 on index prices", route: indexes, fault: sim.Fault{Status: 500},
			want: []string{"index prices", "status 500", "INTERNAL_ERROR"}},
		{name: "timeout", route: positions, fault: sim.Fault{Latency: 3 * time.Second},
			want: []string{"positions", "no complete answer within 250ms"}},
		{name: "connection reset", route: positions, reset: true,
			want: []string{"positions", "GET /v1/contracts/positions"}},
		{name: "429 with Retry-After", route: positions, fault: sim.Fault{Status: 429, RetryAfter: time.Second},
			want: []string{"positions", "rate limited, retry after 1s", "RATE_LIMITED"}, logged: `"delay":"1s"`},
		{name: "429 without Retry-After", route: positions, fault: sim.Fault{Status: 429},
			want: []string{"positions", "rate limited", "RATE_LIMITED"}},
		{name: "malformed JSON", route: positions, fault: sim.Fault{Malformed: true},
			want: []string{"positions", "invalid response", "oops"}},
		{name: "truncated JSON", route: indexes, fault: sim.Fault{Truncated: true},
			want: []string{"index prices", "/v1/market/indexPrices"}},
		{name: "HTML error page", route: positions, fault: sim.Fault{HTML: true},
			want: []string{"positions", "status 502", "invalid response", "502 Bad Gateway"}},
		{name: "success false with 200", route: positions,
			fault: sim.Fault{Body: `{"success":false,"error":"INTERNAL_ERROR","errorMessage":"ledger busy","data":null}`},
			want:  []string{"positions", "status 200", "INTERNAL_ERROR", "ledger busy"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", overMaxRule)
			p := newFaultProxy(t, g.url)
			if tc.reset {
				p.setReset(tc.route, true)
			} else {
				g.ex.InjectFault(tc.route, tc.fault)
			}
			d := g.start(campaignEnv(p.url()))
			waitFor(t, "two failed ticks in the audit log", 20*time.Second, func() bool { return len(g.tickErrors()) >= 2 })
			d.running(t)
			if calls := g.mutating(); len(calls) != 0 {
				t.Fatalf("acted during the fault: %+v", calls)
			}
			errs := g.tickErrors()
			for _, w := range tc.want {
				if !strings.Contains(errs[0], w) {
					t.Errorf("tick error %q does not say %q", errs[0], w)
				}
			}
			logs := d.logs.String()
			if !strings.Contains(logs, `"msg":"tick failed"`) {
				t.Errorf("no tick failed line in the log:\n%s", logs)
			}
			if tc.logged != "" && !strings.Contains(logs, tc.logged) {
				t.Errorf("log lacks %q:\n%s", tc.logged, logs)
			}

			// The fault ends: the guard recovers without help.
			p.setReset(tc.route, false)
			g.ex.ClearFaults()
			waitFor(t, "XSOL lowered to 10x after the fault", 20*time.Second, func() bool { return g.position("XSOL").Leverage == 10 })
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d after the fault, want 0", code)
			}
			calls := g.mutating()
			if len(calls) != 1 || calls[0].Path != settingsXSOL || calls[0].Body != `{"cross":false,"leverage":10}` {
				t.Errorf("mutating calls = %+v, want one settings call lowering XSOL to 10", calls)
			}
		})
	}
}

// The exchange goes away (connections refused) for longer than
// engine.unreachable_after, then comes back on the same address: the guard
// says it is unreachable, then reachable again, and acts only after.
func TestFaultExchangeGoneAndBack(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  unreachable_after: 500ms\n", overMaxRule)
	p := newFaultProxy(t, g.url)
	p.down()
	d := g.start(campaignEnv(p.url()))
	waitFor(t, "the unreachable notification", 20*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "exchange unreachable for")
	})
	d.running(t)
	if calls := g.ex.Calls(); len(calls) != 0 {
		t.Fatalf("the exchange was reached while gone: %+v", calls)
	}
	errs := g.tickErrors()
	if len(errs) == 0 || !strings.Contains(errs[0], "connection refused") {
		t.Errorf("tick errors %q do not say the connection was refused", errs)
	}
	if !strings.Contains(d.logs.String(), "no action is taken without fresh data") {
		t.Errorf("the unreachable line does not say no action is taken:\n%s", d.logs.String())
	}
	p.up()
	waitFor(t, "XSOL lowered once the exchange is back", 20*time.Second, func() bool { return g.position("XSOL").Leverage == 10 })
	waitFor(t, "the reachable-again line", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "exchange reachable again after")
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if calls := g.mutating(); len(calls) != 1 {
		t.Errorf("mutating calls = %+v, want exactly one", calls)
	}
}

// rewriteJSON decodes an envelope's data, lets f change it and encodes it
// again; numbers keep their text.
func rewriteJSON(t *testing.T, body []byte, f func(data any) any) []byte {
	var env map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil {
		t.Errorf("rewrite: %v", err)
		return body
	}
	env["data"] = f(env["data"])
	out, err := json.Marshal(env)
	if err != nil {
		t.Errorf("rewrite: %v", err)
		return body
	}
	return out
}

// rewritePositions lets f change every position of a positions answer;
// other answers pass unchanged.
func rewritePositions(t *testing.T, path string, body []byte, f func(pm map[string]any)) []byte {
	if path != "/v1/contracts/positions" {
		return body
	}
	return rewriteJSON(t, body, func(data any) any {
		for _, p := range data.([]any) {
			f(p.(map[string]any))
		}
		return data
	})
}

// Partial data: one symbol's data is unusable. That symbol is skipped with
// a log line saying why, the others are acted on in the same tick, and the
// skipped one is acted on once its data is whole again.
func TestFaultPartialData(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		rewrite func(t *testing.T, xsolID json.Number, path string, body []byte) []byte
		logged  []string
	}{
		{
			name: "index price missing for one symbol",
			rewrite: func(t *testing.T, _ json.Number, path string, body []byte) []byte {
				if path != "/v1/market/indexPrices" {
					return body
				}
				return rewriteJSON(t, body, func(data any) any {
					delete(data.(map[string]any), "SOL")
					return data
				})
			},
			logged: []string{"no usable index price", "index SOL missing"},
		},
		{
			name: "position naming an unknown symbol id",
			rewrite: func(t *testing.T, xsolID json.Number, path string, body []byte) []byte {
				return rewritePositions(t, path, body, func(pm map[string]any) {
					if pm["symbolId"] == xsolID {
						pm["symbolId"] = json.Number("999999")
					}
				})
			},
			logged: []string{"position names an unknown symbol; skipped", `"symbolId":999999`},
		},
		{
			name: "risk limit with maxLeverage 0",
			rewrite: func(t *testing.T, xsolID json.Number, path string, body []byte) []byte {
				return rewritePositions(t, path, body, func(pm map[string]any) {
					if pm["symbolId"] == xsolID {
						pm["riskLimit"].(map[string]any)["maxLeverage"] = json.Number("0")
					}
				})
			},
			logged: []string{`"state":"nodata"`, `"rule":"over-max-leverage","symbol":"XSOL"`},
		},
		{
			// A leverage of 0 is no data, never "already at target".
			name: "position with leverage 0",
			rewrite: func(t *testing.T, xsolID json.Number, path string, body []byte) []byte {
				return rewritePositions(t, path, body, func(pm map[string]any) {
					if pm["symbolId"] == xsolID {
						pm["leverage"] = json.Number("0")
					}
				})
			},
			logged: []string{`"msg":"rule nodata","rule":"over-max-leverage","symbol":"XSOL","state":"nodata"`},
		},
		{
			// One bad value never blinds the guard: XSOL's position and an
			// empty one carry a riskLevel that is not an integer; XSOL is
			// left out and named, the empty one needs only its identity.
			name: "one bad position among good ones",
			rewrite: func(t *testing.T, xsolID json.Number, path string, body []byte) []byte {
				return rewritePositions(t, path, body, func(pm map[string]any) {
					if pm["symbolId"] == xsolID || pm["empty"] == true {
						pm["riskLevel"] = "high"
					}
				})
			},
			logged: []string{"unreadable items, left out (the rest of each answer is used): positions 1_"},
		},
		{
			name: "one index priced NaN and a spot symbol with a string baseScale",
			rewrite: func(t *testing.T, _ json.Number, path string, body []byte) []byte {
				switch path {
				case "/v1/market/indexPrices":
					return rewriteJSON(t, body, func(data any) any {
						data.(map[string]any)["SOL"] = "NaN"
						return data
					})
				case "/v1/market/trades":
					return rewriteJSON(t, body, func(data any) any {
						spots := data.(map[string]any)["spotsSymbols"].([]any)
						spots[0].(map[string]any)["baseScale"] = "six"
						return data
					})
				}
				return body
			},
			logged: []string{"index prices SOL:", "symbols BTC_USDT:", "index SOL missing"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", overMaxRule+nearLiqXBTC)
			g.ex.SetBalance(decimal.Zero)
			g.putNearLiquidation("XBTC", "BTC", 0.03)
			xsolID := json.Number(decimal.NewFromInt(g.position("XSOL").SymbolID).String())
			p := newFaultProxy(t, g.url)
			p.setRewrite(func(path string, body []byte) []byte { return tc.rewrite(t, xsolID, path, body) })
			d := g.start(campaignEnv(p.url()))
			// The healthy symbol is acted on in spite of the broken one.
			waitFor(t, "XBTC cancelled and isolated", 20*time.Second, func() bool {
				return g.ex.OpenOrders("XBTC") == 0 && !g.position("XBTC").Cross
			})
			waitFor(t, "the skipped symbol's log line", 10*time.Second, func() bool {
				for _, w := range tc.logged {
					if !strings.Contains(d.logs.String(), w) {
						return false
					}
				}
				return true
			})
			d.running(t)
			if calls := g.mutatingOn("XSOL"); len(calls) != 0 {
				t.Fatalf("acted on XSOL with broken data: %+v", calls)
			}
			if g.position("XSOL").Leverage != 15 {
				t.Fatal("XSOL changed")
			}
			// Enough free balance for XSOL's extra margin at 10x, read by a
			// tick before XSOL's data is whole: positions and index prices
			// are read concurrently, and a tick that saw the old balance
			// with the whole index would rightly skip the cut as unfunded
			// and start the rule's cooldown.
			g.ex.SetBalance(decimal.NewFromInt(20000))
			read := p.atExchange("/v1/contracts/positions")
			waitFor(t, "a positions read after the balance changed", 10*time.Second, func() bool {
				return p.atExchange("/v1/contracts/positions") > read
			})
			p.setRewrite(nil)
			waitFor(t, "XSOL lowered once its data is whole", 20*time.Second, func() bool { return g.position("XSOL").Leverage == 10 })
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			if calls := g.mutatingOn("XSOL"); len(calls) != 1 || calls[0].Body != `{"cross":false,"leverage":10}` {
				t.Errorf("XSOL calls = %+v, want one lowering to 10 (never to 1 from a zero maxLeverage)", calls)
			}
			if n := len(g.mutatingOn("XBTC")); n != 2 {
				t.Errorf("XBTC calls = %d, want 2 (cancel, isolate)", n)
			}
		})
	}
}

// Index prices that stop moving while the exchange's clock goes on: past
// engine.stale_after they count as missing. The guard acts only when the
// price moves again.
func TestFaultStaleIndexPrices(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "  stale_after: 400ms\n", nearLiqXBTC)
	g.ex.SetBalance(decimal.Zero)
	d := g.start(campaignEnv(g.url))
	waitFor(t, "a first complete tick", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), `"msg":"rule `) || len(g.ex.Calls()) > 4
	})
	// From now on the index answers replay the last one; meanwhile BTC
	// really moves to 3% above XBTC's liquidation price.
	g.ex.InjectFault("/v1/market/indexPrices", sim.Fault{Stale: true})
	g.putNearLiquidation("XBTC", "BTC", 0.03)
	waitFor(t, "the stale-index log line", 20*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "index BTC unchanged for")
	})
	d.running(t)
	if calls := g.mutating(); len(calls) != 0 {
		t.Fatalf("acted on stale prices: %+v", calls)
	}
	g.ex.ClearFaults()
	waitFor(t, "XBTC protected once prices move", 20*time.Second, func() bool {
		return g.ex.OpenOrders("XBTC") == 0 && !g.position("XBTC").Cross
	})
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	if n := len(g.mutating()); n != 2 {
		t.Errorf("mutating calls = %d, want 2 (cancel, isolate on XBTC)", n)
	}
}

// A server clock 5 minutes ahead, from the start or jumping while the guard
// runs: the client measures the offset and the signed calls are accepted.
func TestFaultServerClockOff(t *testing.T) {
	t.Parallel()
	t.Run("from the start", func(t *testing.T) {
		t.Parallel()
		g := newGuardEnv(t, "", overMaxRule)
		g.ex.SetClockOffset(5 * time.Minute)
		code, stderr := g.once()
		if code != 0 || g.position("XSOL").Leverage != 10 {
			t.Fatalf("exit %d, XSOL %dx; want 0 and 10x\n%s", code, g.position("XSOL").Leverage, stderr)
		}
		for _, c := range g.ex.Calls() {
			if c.Status == http.StatusUnauthorized {
				t.Errorf("a call was refused: %+v", c)
			}
		}
	})
	t.Run("jump while running", func(t *testing.T) {
		t.Parallel()
		g := newGuardEnv(t, "", nearLiqXBTC)
		// The default clock_sync (10m): a refused call measures again.
		d := g.start(campaignEnv(g.url))
		waitFor(t, "ticks", 10*time.Second, func() bool { return len(g.ex.Calls()) > 6 })
		g.ex.SetClockOffset(-5 * time.Minute)
		// Refused while the offset is too fresh to measure again (5s),
		// then measured and accepted.
		waitFor(t, "a refused timestamp", 10*time.Second, func() bool {
			return strings.Contains(strings.Join(g.tickErrors(), "\n"), "TIMESTAMP_EXPIRED")
		})
		g.ex.SetBalance(decimal.Zero)
		g.putNearLiquidation("XBTC", "BTC", 0.03)
		waitFor(t, "XBTC protected after the resync", 20*time.Second, func() bool {
			return g.ex.OpenOrders("XBTC") == 0 && !g.position("XBTC").Cross
		})
		d.running(t)
		if code := d.stop(t); code != 0 {
			t.Errorf("exit %d, want 0", code)
		}
		if !strings.Contains(d.logs.String(), "its clock had moved against ours; offset measured again") {
			t.Error("the log does not say the clock was measured again")
		}
	})
}

// A wrong secret: every signed call is refused with 401. The error says so
// plainly, there are no retries (one positions call per tick), and nothing
// is acted on.
func TestFaultSignatureRejected(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	env := campaignEnv(g.url)
	env["RISKGUARD_API_SECRET"] = "not-the-secret"
	d := g.start(env)
	waitFor(t, "five failed ticks", 20*time.Second, func() bool { return len(g.tickErrors()) >= 5 })
	code := d.stop(t)
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
	errs := g.tickErrors()
	for _, w := range []string{"positions", "status 401", "SIGNATURE_INVALID", "signature does not match"} {
		if !strings.Contains(errs[0], w) {
			t.Errorf("tick error %q does not say %q", errs[0], w)
		}
	}
	signed := 0
	for _, c := range g.ex.Calls() {
		if c.Mutating {
			t.Errorf("mutating call with a wrong secret: %+v", c)
		}
		if c.Route == "/v1/contracts/positions" {
			signed++
		}
	}
	if ticks := len(g.tickErrors()); signed > ticks {
		t.Errorf("%d positions calls for %d failed ticks: a refused signature was retried", signed, ticks)
	}
	if strings.Contains(d.logs.String(), "not-the-secret") {
		t.Error("the secret appears in the log")
	}
}

// An action that fails half-way: the settings call is accepted and the
// cancel refused. The accepted part is not sent again (the position reads
// back at its target); the failed part is retried, and said, until it
// succeeds; then the cooldown holds.
func TestFaultActionHalfWay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		status int
		logged string
		times  int
	}{
		// A 5xx is retried the next tick.
		{"cancel 5xx", 500, "actions failed; retried next tick", 3},
		// A 4xx is not repeated every tick: it waits for the cooldown (1s here).
		{"cancel 4xx", 400, "the exchange refused the action; retried after the cooldown", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rule := strings.Replace(nearLiqXBTC, "cooldown: 5m", "cooldown: 1s", 1)
			g := newGuardEnv(t, "", rule)
			g.ex.SetBalance(decimal.Zero)
			g.putNearLiquidation("XBTC", "BTC", 0.03)
			g.ex.InjectFault("/v1/contracts/orders/XBTC/cancel", sim.Fault{Status: tc.status, Times: tc.times})
			env := campaignEnv(g.url)
			env["RISKGUARD_EXCHANGE_MAX_RETRIES"] = "0"
			d := g.start(env)
			waitFor(t, "the cancel to succeed at last", 20*time.Second, func() bool { return g.ex.OpenOrders("XBTC") == 0 })
			d.running(t)
			if code := d.stop(t); code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			// Up to the first accepted cancel: tc.times refused, one accepted.
			// (Later cancels belong to the next cooldown period.)
			var refused, settings int
			accepted := false
			for _, c := range g.mutatingOn("XBTC") {
				switch {
				case strings.HasSuffix(c.Path, "/settings"):
					settings++
				case accepted:
				case c.Status == http.StatusOK:
					accepted = true
				default:
					refused++
				}
			}
			if settings != 1 {
				t.Errorf("settings calls = %d, want 1: the accepted half was sent again", settings)
			}
			if refused != tc.times || !accepted {
				t.Errorf("%d cancels refused before the first accepted (accepted: %t), want %d", refused, accepted, tc.times)
			}
			if g.position("XBTC").Cross {
				t.Error("XBTC not isolated")
			}
			if !strings.Contains(d.logs.String(), tc.logged) {
				t.Errorf("log lacks %q:\n%s", tc.logged, d.logs.String())
			}
			var failed int
			for _, r := range g.auditLines() {
				if r.Type == "action" && r.Action == "cancel_orders" && r.Phase == "result" {
					break
				}
				if r.Type == "action" && r.Action == "cancel_orders" && r.Phase == "error" {
					failed++
					if !strings.Contains(r.Error, fmt.Sprintf("status %d", tc.status)) || !strings.Contains(r.Error, "cancel") {
						t.Errorf("audit error %q does not name the call and its status", r.Error)
					}
				}
			}
			if failed != tc.times {
				t.Errorf("audit: %d cancel errors before the first result, want %d", failed, tc.times)
			}
		})
	}
}

// max_retries: 0 means one attempt, not the client's default of four.
func TestMaxRetriesZeroMeansOneAttempt(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	g.ex.InjectFault("/v1/contracts/positions", sim.Fault{Status: 503})
	for _, tc := range []struct {
		retries string
		want    int
	}{{"0", 1}, {"2", 3}} {
		cfg, err := loadConfig(g.config, func(k string) string {
			if k == "RISKGUARD_EXCHANGE_MAX_RETRIES" {
				return tc.retries
			}
			return g.env(k)
		})
		if err != nil {
			t.Fatal(err)
		}
		c, err := newClient(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		g.ex.ResetCalls()
		if _, err := c.Positions(context.Background()); err == nil {
			t.Fatal("positions read through a 503")
		}
		n := 0
		for _, call := range g.ex.Calls() {
			if call.Route == "/v1/contracts/positions" {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("max_retries %s: %d attempts, want %d", tc.retries, n, tc.want)
		}
	}
}

// kill -9 of the real binary while an action is in flight. Two moments:
// the exchange has applied the settings but the answer never came back
// (held by the proxy), or the request is still waiting in the exchange
// (Latency) and dies with the connection. After a restart the position is
// read back: no second change beyond what idempotency allows, and the
// audit log says that an action was left without a result.
func TestBinaryKilledMidAction(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	for _, tc := range []struct {
		name string
		// applied: the exchange applied the first call before the kill.
		applied bool
	}{
		{"answer lost after the exchange applied it", true},
		{"request lost before the exchange applied it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "", overMaxRule)
			p := newFaultProxy(t, g.url)
			if tc.applied {
				p.setHold(settingsXSOL)
			} else {
				g.ex.InjectFault(settingsXSOL, sim.Fault{Latency: time.Minute, Times: 1})
			}
			env := append(os.Environ(), "RISKGUARD_API_KEY="+sim.DefaultKey, "RISKGUARD_API_SECRET="+sim.DefaultSecret,
				"RISKGUARD_EXCHANGE_BASE_URL="+p.url())
			cmd := exec.Command(bin, "run", "--config", g.config, "--log-format", "json")
			cmd.Env = env
			var stderr lockedBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			if tc.applied {
				select {
				case <-p.held:
				case <-time.After(20 * time.Second):
					t.Fatalf("the settings call never reached the exchange:\n%s", stderr.String())
				}
			} else {
				waitFor(t, "the settings call in flight", 20*time.Second, func() bool {
					for _, r := range g.auditLines() {
						if r.Phase == "sent" && r.Symbol == "XSOL" {
							return true
						}
					}
					return false
				})
				// The audit line comes before the request: kill only once
				// the exchange has it, or it never sees the client go.
				waitFor(t, "the settings call at the exchange", 20*time.Second, func() bool {
					p.mu.Lock()
					defer p.mu.Unlock()
					return p.upstream[settingsXSOL] > 0
				})
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			var phases []string
			for _, r := range g.auditLines() {
				if r.Type == "action" && r.Symbol == "XSOL" {
					phases = append(phases, r.Phase)
				}
			}
			if strings.Join(phases, ",") != "intended,sent" {
				t.Fatalf("audit phases before the restart = %v, want intended,sent", phases)
			}
			if tc.applied && g.position("XSOL").Leverage != 10 {
				t.Fatal("the exchange did not apply the held call")
			}
			if !tc.applied {
				// The dropped connection ends the exchange's wait; the call
				// is logged with no status and not applied.
				waitFor(t, "the exchange to see the client go", 10*time.Second, func() bool {
					for _, c := range g.mutatingOn("XSOL") {
						if c.Status == 0 {
							return true
						}
					}
					return false
				})
				if g.position("XSOL").Leverage != 15 {
					t.Fatal("the exchange applied a call the client abandoned")
				}
			}

			p.setHold("")
			restart := exec.Command(bin, "run", "--config", g.config, "--once", "--log-format", "json")
			restart.Env = env
			out, err := restart.CombinedOutput()
			if err != nil {
				t.Fatalf("restart --once: %v\n%s", err, out)
			}
			if g.position("XSOL").Leverage != 10 {
				t.Fatalf("XSOL at %dx after the restart, want 10\n%s", g.position("XSOL").Leverage, out)
			}
			applied := 0
			for _, c := range g.mutatingOn("XSOL") {
				if c.Status == http.StatusOK {
					applied++
				}
			}
			if applied != 1 {
				t.Errorf("settings applied %d times, want 1: %+v", applied, g.mutatingOn("XSOL"))
			}
			var interrupted bool
			for _, r := range g.auditLines() {
				if r.Type == "action" && r.Symbol == "XSOL" && r.Phase == "interrupted" {
					interrupted = true
					if !strings.Contains(r.Reason, "no result was recorded") {
						t.Errorf("interrupted record reason %q", r.Reason)
					}
				}
			}
			if !interrupted {
				t.Errorf("the audit log does not say the action was interrupted: %+v", g.auditLines())
			}
			if !strings.Contains(string(out), "an action was interrupted") {
				t.Errorf("the restart does not log the interrupted action:\n%s", out)
			}
		})
	}
}
