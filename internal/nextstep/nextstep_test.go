package nextstep

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// Each failure, made for real over loopback where it can be, gets its
// step, and Wrap keeps the raw error after it.
func TestStepOfEachFailure(t *testing.T) {
	t.Parallel()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()

	// get is a GET of u as a client would make it, the answer of a
	// non-2xx status read into the error as the callers do.
	get := func(u string) error {
		resp, err := http.Get(u)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	target := func(u string) Target {
		return Target{Name: "the exchange", Setting: "exchange.base_url", URL: u, Start: "start it",
			Credentials: "check RISKGUARD_API_KEY", Timeout: "raise exchange.timeout"}
	}
	tests := []struct {
		name string
		url  string
		err  func(u string) error
		want string
	}{
		{"https:// to plain HTTP", strings.Replace(plain.URL, "http://", "https://", 1), get,
			"the exchange answers plain HTTP at that address: write http:// in exchange.base_url"},
		{"http:// to TLS", strings.Replace(tlsSrv.URL, "https://", "http://", 1), get,
			"the exchange answers HTTPS at that address: write https:// in exchange.base_url"},
		{"nothing listens", "http://" + closed, get,
			"nothing listens at exchange.base_url (" + closed + "): start it"},
		{"an untrusted certificate", tlsSrv.URL, get,
			"the exchange's TLS certificate is not trusted: check exchange.base_url"},
		{"no such host", "http://nowhere.invalid", func(u string) error {
			return &url.Error{Op: "Get", URL: u, Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nowhere.invalid", IsNotFound: true}}}
		}, "the host of exchange.base_url does not resolve"},
		{"a reset http:// connection", "http://127.0.0.1:1", func(string) error { return errors.New("read tcp 127.0.0.1:1: read: connection reset by peer") },
			"the exchange closed the connection to an http:// address: if it serves HTTPS there, write https:// in exchange.base_url"},
		{"a reset of an http:// address the error quotes", "", func(string) error {
			return errors.New(`GET /v1/market/trades: Get "http://127.0.0.1:1/v1/market/trades": read tcp 127.0.0.1:5->127.0.0.1:1: read: connection reset by peer`)
		}, "the exchange closed the connection to an http:// address: if it serves HTTPS there, write https:// in exchange.base_url"},
		{"a reset https:// connection says nothing", "https://127.0.0.1:1", func(string) error { return errors.New("read: connection reset by peer") }, ""},
		{"401", "http://x", func(string) error { return errors.New("GET /v1/x: status 401: UNAUTHORIZED") },
			"the exchange refused the credentials: check RISKGUARD_API_KEY"},
		{"a timeout", "http://x", func(string) error { return errors.New("dial tcp: i/o timeout") },
			"the exchange is slow or unreachable: check the network, or raise exchange.timeout"},
		{"something else", "http://x", func(string) error { return errors.New("status 500") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := tt.err(tt.url)
			tg := target(tt.url)
			got := tg.For(raw)
			if tt.want == "" {
				if got != "" || tg.Wrap(raw) != raw {
					t.Errorf("step %q for %v, want none", got, raw)
				}
				return
			}
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("step %q\nwant %q\nfor %v", got, tt.want, raw)
			}
			w := tg.Wrap(raw)
			if w.Error() != got+": "+raw.Error() || !errors.Is(w, raw) {
				t.Errorf("Wrap = %q", w)
			}
			if tg.Wrap(w) != w {
				t.Error("a wrapped error got a second step")
			}
			if tg.ForText(raw.Error()) == "" {
				t.Errorf("ForText says nothing for %q", raw)
			}
		})
	}
}

func TestShownURL(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"https://hooks.slack.com/services/T0/B0/SECRET", "https://hooks.slack.com/REDACTED"},
		{"https://user:pass@example.org:8443/hook?token=SECRET", "https://example.org:8443/REDACTED"},
		{"http://127.0.0.1:9000", "http://127.0.0.1:9000"},
		{"http://127.0.0.1:9000/", "http://127.0.0.1:9000"},
		{"://bad", "REDACTED"},
	} {
		if got := ShownURL(tt.in); got != tt.want {
			t.Errorf("ShownURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
