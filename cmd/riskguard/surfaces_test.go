package main

// The daemon's surfaces against a hostile world (issue 20): the status
// page and API through the real daemon's listener, rendered by headless
// Chromium where the page matters.

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// chromiumDOM loads url in headless Chromium with args and returns the DOM
// after the page's script ran; the test skips when chromium is not
// installed (.ci/run installs it as root).
func chromiumDOM(t *testing.T, url string, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (apt-get install chromium): the status page is not rendered")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=5000", "--dump-dom"}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// get GETs url with the Host header host ("" keeps the URL's) and returns
// the status and body.
func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// statusOf decodes GET /api/v1/status, failing the test unless it is a
// 200 with valid JSON.
func statusOf(t *testing.T, addr string) map[string]any {
	t.Helper()
	code, body := get(t, "http://"+addr+"/api/v1/status", "")
	var st map[string]any
	if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
		t.Fatalf("GET /api/v1/status = %d, not JSON: %q", code, body)
	}
	return st
}

// positionOf returns the status's position of symbol, or nil.
func positionOf(st map[string]any, symbol string) map[string]any {
	ps, _ := st["positions"].([]any)
	for _, p := range ps {
		if pm, _ := p.(map[string]any); pm["symbol"] == symbol {
			return pm
		}
	}
	return nil
}

// renderedPositions checks that Chromium rendered the page with its data:
// a row per symbol and no error line.
func renderedPositions(t *testing.T, dom string, symbols ...string) {
	t.Helper()
	if strings.Contains(dom, `<div id="err">cannot`) || !strings.Contains(dom, `id="positions"`) {
		t.Errorf("the page did not render the status:\n%s", dom)
	}
	for _, s := range symbols {
		if !strings.Contains(dom, `data-symbol="`+s+`"`) {
			t.Errorf("the rendered page lacks %s", s)
		}
	}
}

// An index price a float cannot hold ("1e400", +Inf as a float) never
// blanks the status: /api/v1/status stays valid JSON with that symbol as
// no data (no index, no distance) and the others as they are, and the page
// renders. Before, the encoder failed after the header: a 200 with an
// empty body and nothing logged.
func TestStatusWithAnIndexPastFloatRange(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", overMaxRule)
	p := newFaultProxy(t, g.url)
	p.setRewrite(func(path string, body []byte) []byte {
		if path != "/v1/market/indexPrices" {
			return body
		}
		return rewriteJSON(t, body, func(data any) any {
			data.(map[string]any)["SOL"] = "1e400"
			return data
		})
	})
	g.url = p.url()
	g.writeConfig("  listen: 127.0.0.1:0\n", overMaxRule)
	addr, logs, stop := g.serve()
	waitFor(t, "a complete snapshot in the status", 10*time.Second, func() bool {
		return positionOf(statusOf(t, addr), "XBTC")["liquidationDistance"] != nil
	})
	st := statusOf(t, addr)
	xsol := positionOf(st, "XSOL")
	if xsol == nil || xsol["liquidationDistance"] != nil || xsol["index"] != "0" {
		t.Errorf("XSOL is not shown as no data: %v", xsol)
	}
	if d, ok := positionOf(st, "XBTC")["liquidationDistance"].(float64); !ok || !(d > 0) {
		t.Errorf("XBTC's distance = %v", positionOf(st, "XBTC")["liquidationDistance"])
	}
	renderedPositions(t, chromiumDOM(t, "http://"+addr+"/"), "XBTC", "XETH", "XSOL")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if calls := g.mutatingOn("XSOL"); len(calls) != 0 {
		t.Errorf("acted on XSOL without a usable index: %+v", calls)
	}
	if strings.Contains(logs.String(), "GET /api/v1/status failed") {
		t.Errorf("the status failed to encode:\n%s", logs)
	}
}

// A configuration with only an account rule, or with rules scoped to other
// symbols, gives every position "rules": [] (it was null, and the page
// threw and showed nothing); the page renders.
func TestStatusWithNoRuleOnAPosition(t *testing.T) {
	t.Parallel()
	for name, rules := range map[string]string{
		"only an account rule": `
  - name: account-margin-call
    scope: account
    when: account.marginRatio > 0.8
    actions:
      - action: notify
`,
		"rules of another symbol": `
  - name: xbtc-only
    symbols: [XBTC]
    when: position.leverage > 100
    actions:
      - action: notify
`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			g := newGuardEnv(t, "  listen: 127.0.0.1:0\n", rules)
			addr, _, stop := g.serve()
			waitFor(t, "positions in the status", 10*time.Second, func() bool { return positionOf(statusOf(t, addr), "XSOL") != nil })
			_, body := get(t, "http://"+addr+"/api/v1/status", "")
			if strings.Contains(body, "null") {
				t.Errorf("the status has a null:\n%s", body)
			}
			if r, ok := positionOf(statusOf(t, addr), "XSOL")["rules"].([]any); !ok || len(r) != 0 {
				t.Errorf("XSOL's rules = %v, want []", positionOf(statusOf(t, addr), "XSOL")["rules"])
			}
			renderedPositions(t, chromiumDOM(t, "http://"+addr+"/"), "XBTC", "XETH", "XSOL")
			if err := stop(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
