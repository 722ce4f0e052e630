package deploy

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// promtool returns the path of promtool or skips the test.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found (Debian package prometheus): the rules are not checked by Prometheus")
	}
	return p
}

// promtool check rules and test rules pass on the alerts.
func TestPromtoolRules(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "prometheus-alerts.yaml"},
		{"test", "rules", "prometheus-alerts.test.yaml"},
		{"test", "rules", "prometheus-alerts.ha.test.yaml"},
	} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every alert is tested both firing and silent, and the tests name no
// alert that does not exist.
func TestPromAlertTestsCoverEveryAlert(t *testing.T) {
	t.Parallel()
	var alerts []string
	for _, g := range readAlerts(t).Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alert in prometheus-alerts.yaml")
	}
	data, err := os.ReadFile("prometheus-alerts.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				Alertname string
				ExpAlerts []any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		}
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tests.RuleFiles, []string{"prometheus-alerts.yaml"}) {
		t.Errorf("rule_files: got %q, want [prometheus-alerts.yaml]", tests.RuleFiles)
	}
	firing, silent := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(alerts, a.Alertname) {
				t.Errorf("a test names %s, which is no alert", a.Alertname)
			}
			if len(a.ExpAlerts) > 0 {
				firing[a.Alertname] = true
			} else {
				silent[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !firing[a] {
			t.Errorf("%s: no test expects it to fire", a)
		}
		if !silent[a] {
			t.Errorf("%s: no test expects it silent", a)
		}
	}
}

// The dashboard is one Grafana imports: a schema version of Grafana 10/11,
// a Prometheus data source variable every panel and target uses, unique
// panel ids with a place on the grid, and targets that Prometheus parses
// (checked with promtool when present, Grafana's variables replaced).
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	d := readDashboard(t)
	if d.SchemaVersion < 36 || d.SchemaVersion > 41 {
		t.Errorf("schemaVersion %d, want about 39", d.SchemaVersion)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: want both", d.Title, d.UID)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
	}
	if !dsVar {
		t.Error("no datasource variable of type prometheus")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos == nil || p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: no gridPos", p.Title)
		}
		if p.Datasource.Type != "prometheus" || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no target", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" {
				t.Errorf("panel %q: target without expr or refId", p.Title)
			}
		}
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Log("promtool not found: the targets' PromQL is not parsed")
		return
	}
	// Each target as a recording rule, so promtool check rules parses it.
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")
	i := 0
	for where, expr := range dashboardExprs(d) {
		i++
		fmt.Fprintf(&b, "      - record: dashboard:target%d\n        # %s\n        expr: %q\n", i, where, vars.Replace(expr))
	}
	rules := filepath.Join(t.TempDir(), "dashboard-rules.yaml")
	if err := os.WriteFile(rules, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", rules).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's targets do not parse: %v\n%s\n%s", err, out, b.String())
	}
}
