package deploy

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/ha"
	"github.com/riskguard/riskguard/notify"
	"gopkg.in/yaml.v3"
)

// alertRules is the part of a Prometheus rule file the tests read.
type alertRules struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr string
		}
	}
}

func readAlerts(t *testing.T) alertRules {
	t.Helper()
	data, err := os.ReadFile("prometheus-alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var r alertRules
	if err := yaml.Unmarshal(data, &r); err != nil {
		t.Fatalf("prometheus-alerts.yaml: %v", err)
	}
	return r
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	SchemaVersion int    `json:"schemaVersion"`
	Title         string `json:"title"`
	UID           string `json:"uid"`
	Templating    struct {
		List []struct {
			Name, Type string
			Query      any
		}
	}
	Panels []struct {
		ID         int    `json:"id"`
		Title      string `json:"title"`
		Type       string `json:"type"`
		Datasource struct {
			Type, UID string
		}
		GridPos *struct{ X, Y, W, H int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		}
	}
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	return d
}

// dashboardExprs lists every target expression, named by panel and refId.
func dashboardExprs(d dashboard) map[string]string {
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
		}
	}
	return out
}

var (
	promString   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promToken    = regexp.MustCompile(`[A-Za-z0-9_:.$]+`)
	promKeywords = map[string]bool{
		"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true,
	}
)

// metricNames returns the metric names a PromQL expression selects: what
// is left once strings, label matchers, ranges and groupings are removed,
// less function and aggregation names (followed by "("), keywords and
// numbers.
func metricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promToken.FindAllStringIndex(s, -1) {
		tok := s[loc[0]:loc[1]]
		if promKeywords[tok] || tok[0] == '$' || (tok[0] >= '0' && tok[0] <= '9') || tok[0] == '.' {
			continue
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue
		}
		out = append(out, tok)
	}
	return out
}

func TestDeployMetricNamesExtraction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ expr, want string }{
		{`up{job="riskguard"} == 0 or absent(up{job="riskguard"})`, "up up"},
		{`sum by (result) (rate(riskguard_ticks_total{job=~"$job",result="error"}[$__rate_interval]))`, "riskguard_ticks_total"},
		{`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="{}"}[5m]))) > 0.5`, "a_bucket"},
		{`sum(rate(a_sum[5m])) / on (instance) group_left(x) sum(rate(a_count[5m])) > bool 1e3`, "a_sum a_count"},
		{`increase(riskguard_audit_errors_total[10m]) > 0 unless b offset 5m`, "riskguard_audit_errors_total b"},
	} {
		if got := strings.Join(metricNames(tc.expr), " "); got != tc.want {
			t.Errorf("metricNames(%s): got %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// describedNames returns the metric names the daemon's own collectors
// declare: the engine's and the notification dispatcher's. A vector with
// no series yet (model mismatches, rule errors) is absent from a scrape
// but declared here.
func describedNames(t *testing.T) map[string]bool {
	t.Helper()
	rec := &describeRecorder{names: map[string]bool{}}
	if _, err := journal.NewMetrics(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := ha.NewMetrics(rec); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOOK": "http://127.0.0.1:1/hook"}
	cfg, errs := notify.ParseConfig(map[string]any{
		"heartbeat_url_env": "HOOK",
		"channels":          map[string]any{"ops": map[string]any{"type": "webhook", "url_env": "HOOK"}},
	}, func(k string) string { return env[k] })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	d, err := notify.NewDispatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Register(d.Collector()); err != nil {
		t.Fatal(err)
	}
	return rec.names
}

// describeRecorder is a Registerer that keeps the names of what is
// registered on it.
type describeRecorder struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *describeRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *describeRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.Register(c)
	}
}

func (r *describeRecorder) Unregister(prometheus.Collector) bool { return false }

// scrapedNames runs the daemon (the Dockerfile's binary) against the
// simulated exchange with a rule that acts and a notification channel,
// and returns the metric names its /metrics serves.
func scrapedNames(t *testing.T) map[string]bool {
	t.Helper()
	bin := staticBinary(t)
	ex, err := sim.New(sim.Config{Key: sim.DefaultKey, Secret: sim.DefaultSecret, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	exSrv := httptest.NewServer(ex)
	t.Cleanup(exSrv.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	config := filepath.Join(dir, "riskguard.yaml")
	body := fmt.Sprintf(`exchange:
  base_url: %s
engine:
  interval: 100ms
  listen: 127.0.0.1:0
  audit_log: %s
  state_file: %s
notify:
  heartbeat_url_env: TEST_HOOK
  channels:
    ops: {type: webhook, url_env: TEST_HOOK}
rules:
  - name: over-max-leverage
    when: position.leverage > riskLimit.maxLeverage
    allow_closer_liquidation: true
    actions:
      - action: lower_leverage
        leverage: riskLimit.maxLeverage
      - action: notify
        channels: [ops]
`, exSrv.URL, filepath.Join(dir, "audit.jsonl"), filepath.Join(dir, "state.json"))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--config", config, "--log-format", "json")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TEST_HOOK=" + hook.URL,
		"RISKGUARD_API_KEY=" + sim.DefaultKey, "RISKGUARD_API_SECRET=" + sim.DefaultSecret}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Error("the daemon did not exit within 20s of SIGTERM")
		}
	})
	addrc := make(chan string, 1)
	var logs strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving /metrics and /healthz" {
				addrc <- line.Addr
			}
		}
		exited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-exited:
		exited <- err
		t.Fatalf("the daemon exited before listening: %v\n%s", err, logs.String())
	case <-time.After(20 * time.Second):
		t.Fatal("the daemon logged no listen address within 20s")
	}
	// Wait for a tick that acted, so the vectors have series.
	deadline := time.After(20 * time.Second)
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	for {
		names, body := scrape(t, addr)
		if names["riskguard_ticks_total"] && strings.Contains(body, `riskguard_actions_total{action="lower_leverage",result="ok"}`) {
			return names
		}
		select {
		case <-deadline:
			t.Fatalf("no tick with an action on /metrics within 20s:\n%s", body)
		case <-poll.C:
		}
	}
}

// scrape returns the metric names of one /metrics answer and the answer.
func scrape(t *testing.T, addr string) (map[string]bool, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(data), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names, string(data)
}

// exported reports whether name is a series the daemon exports: one of
// known, or a histogram's _bucket, _sum or _count of one declared.
func exported(known map[string]bool, name string) bool {
	if known[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && known[base] {
			return true
		}
	}
	return false
}

// Every metric the alerts and the dashboard query is one the daemon
// exports: those the running daemon serves on /metrics (skipped under
// -short, which builds no binary) and those its collectors declare. `up`
// is Prometheus' own. And every engine metric has a dashboard panel.
func TestDeployMetricsAreExported(t *testing.T) {
	t.Parallel()
	described := describedNames(t)
	known := map[string]bool{"up": true}
	for n := range described {
		known[n] = true
	}
	if testing.Short() {
		t.Log("-short: checking against the daemon's declared collectors only, not a scrape of the running daemon")
	} else {
		scraped := scrapedNames(t)
		for n := range scraped {
			known[n] = true
		}
		// What is declared and served by the engine must agree: a
		// declared metric the daemon does not register would pass here
		// and fail in production.
		for _, n := range []string{"riskguard_ticks_total", "riskguard_tick_duration_seconds_bucket", "riskguard_snapshot_age_seconds",
			"riskguard_breaker_open", "riskguard_notify_messages_total"} {
			if !scraped[n] {
				t.Errorf("the running daemon does not serve %s", n)
			}
		}
	}
	exprs := dashboardExprs(readDashboard(t))
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			exprs[fmt.Sprintf("alert %s", r.Alert+r.Record)] = r.Expr
		}
	}
	used := map[string]bool{}
	for where, expr := range exprs {
		names := metricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if !exported(known, n) {
				t.Errorf("%s: %s is not a metric the daemon exports (expr %q)", where, n, expr)
			}
		}
	}
	rec := &describeRecorder{names: map[string]bool{}}
	journal.NewMetrics(rec)
	for n := range rec.names {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(used)), func(u string) bool { return u == n || strings.HasPrefix(u, n+"_") }) {
			t.Errorf("the engine's %s is on no dashboard panel or alert", n)
		}
	}
}
