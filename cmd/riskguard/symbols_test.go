package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/rules"
)

const misspeltSymbolRule = `
  - name: btc-only
    when: position.leverage > riskLimit.maxLeverage
    symbols: [XETH, XBTCC]
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
`

// A rule naming a symbol the exchange does not list would guard nothing:
// run refuses to start on it (unless told otherwise), a reload is
// rejected, and check --exchange reports it; each names the place and the
// likely symbol.
func TestUnknownSymbolsReported(t *testing.T) {
	t.Parallel()
	g := newGuardEnv(t, "", misspeltSymbolRule)
	want := g.config + `:12:21: rule "btc-only": symbol "XBTCC" is not listed by the exchange (did you mean "XBTC"?)`

	code, stderr := g.once()
	if code != 1 || !strings.Contains(stderr, want+"\n") || !strings.Contains(stderr, "--allow-unknown-symbols starts anyway") {
		t.Errorf("run --once: exit %d\n%s\nwant the line %q", code, stderr, want)
	}
	if n := len(g.mutating()); n != 0 {
		t.Errorf("a refused start sent %d mutating calls", n)
	}
	code, stderr = g.once("--allow-unknown-symbols")
	if code != 0 || !strings.Contains(stderr, `symbol \"XBTCC\" is not listed`) && !strings.Contains(stderr, `symbol "XBTCC" is not listed`) {
		t.Errorf("run --once --allow-unknown-symbols: exit %d, want 0 with a warning\n%s", code, stderr)
	}

	// check --exchange reads the public symbol list, without credentials.
	code, stdout, stderr := runOut(t, context.Background(), envMap(nil), "check", "--config", g.config, "--exchange", g.url)
	if code != 1 || stdout != "" || !strings.Contains(stderr, want+"\n") || !strings.Contains(stderr, ": 1 error") {
		t.Errorf("check --exchange: exit %d, stdout %q\n%s\nwant the line %q", code, stdout, stderr, want)
	}
	code, _, stderr = runOut(t, context.Background(), envMap(nil), "check", "--config", g.config)
	if code != 0 {
		t.Errorf("check without --exchange reads no exchange, so it passes: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runOut(t, context.Background(), envMap(nil), "check", "--config", g.config, "--exchange", "http://127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, "riskguard check: --exchange http://127.0.0.1:1: nothing listens at the --exchange URL (127.0.0.1:1): ") ||
		!strings.Contains(stderr, ": read the exchange's symbols:") {
		t.Errorf("check --exchange with no exchange there: exit %d\n%s", code, stderr)
	}

	// A running daemon rejects a reload that names an unknown symbol.
	g.writeConfig("", overMaxRule)
	dm := g.start(nil)
	defer dm.stop(t)
	waitFor(t, "the start", 10*time.Second, func() bool { return strings.Contains(dm.logs.String(), "riskguard started") })
	g.writeConfig("", strings.ReplaceAll(misspeltSymbolRule, "XBTCC", "xbtc"))
	dm.reload <- nil
	waitFor(t, "the reload to be rejected", 10*time.Second, func() bool {
		return strings.Contains(dm.logs.String(), "config reload rejected")
	})
	logs := dm.logs
	if !strings.Contains(logs.String(), `xbtc`) || !strings.Contains(logs.String(), `did you mean`) {
		t.Errorf("the rejected reload does not name the symbol:\n%s", logs.String())
	}
}

func TestSetUnknownSymbols(t *testing.T) {
	t.Parallel()
	set, err := rules.Parse("r.yaml", []byte("rules:\n  - name: a\n    when: true\n    symbols: [xbtc, XETH, DOGE]\n"))
	if err != nil {
		t.Fatal(err)
	}
	got := set.UnknownSymbols([]string{"XBTC", "XETH", "XSOL"})
	want := []string{
		`r.yaml:4:15: rule "a": symbol "xbtc" is not listed by the exchange (did you mean "XBTC"?)`,
		`r.yaml:4:27: rule "a": symbol "DOGE" is not listed by the exchange`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d errors %v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i].Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, got[i].Error(), want[i])
		}
	}
}

func TestSnake(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"IndexNames": "index_names", "BaseURL": "base_url", "APIKey": "api_key",
		"MaxActionsPerMinute": "max_actions_per_minute", "Interval": "interval", "DryRun": "dry_run"} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// A reload that changes what only a restart applies is refused by name:
// nothing of it is applied, rather than the rules alone. Every other
// section is applied: exchange.index_names, the engine settings and the
// notify section, together with the rules.
func TestReloadAppliesEverySectionOrRefusesByName(t *testing.T) {
	t.Parallel()
	hook := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case hook <- string(b):
		default:
		}
	}))
	defer srv.Close()
	g := newGuardEnv(t, "", overMaxRule)
	d := g.start(nil)
	waitFor(t, "the start", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "riskguard started") })
	body, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(g.config, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		d.reload <- nil
	}

	restart := strings.Replace(string(body), "engine:\n", "engine:\n  stale_after: 30s\n", 1)
	restart = strings.Replace(restart, "  interval: 100ms\n", "  interval: 200ms\n", 1)
	restart = strings.Replace(restart, "exchange:\n", "exchange:\n  timeout: 3s\n", 1)
	write(restart)
	waitFor(t, "the reload to be refused", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), "exchange.timeout, engine.interval changed, which takes a restart to apply")
	})
	if strings.Contains(d.logs.String(), "config reloaded") {
		t.Error("the refused reload was applied")
	}

	// XBTC priced by an index the exchange does not list: applied, the
	// guard says it has no price for it.
	hot := strings.Replace(string(body), "engine:\n", "engine:\n  stale_after: 30s\n", 1)
	hot = strings.Replace(hot, "exchange:\n", "exchange:\n  index_names: {XBTC: NOPE}\n", 1)
	hot = strings.Replace(hot, "rules:\n", "notify:\n  channels:\n    hook: {type: webhook, url: "+srv.URL+"}\n  group_wait: 0s\nrules:\n", 1)
	write(hot)
	waitFor(t, "the reload applied", 10*time.Second, func() bool {
		return strings.Contains(d.logs.String(), `"msg":"config reloaded"`) &&
			strings.Contains(d.logs.String(), "engine.stale_after,exchange.index_names,notify")
	})
	waitFor(t, "index_names applied", 10*time.Second, func() bool { return strings.Contains(d.logs.String(), "index NOPE") })
	if code := d.stop(t); code != 0 {
		t.Errorf("exit %d", code)
	}
	var got []string
	for !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "riskguard stopped") }) {
		select {
		case m := <-hook:
			got = append(got, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("the notify section added by the reload did not deliver the stop notice; got %q", got)
		}
	}
}
