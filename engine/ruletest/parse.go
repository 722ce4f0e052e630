// Package ruletest runs rule tests, as `promtool test rules` runs
// Prometheus' production rule code on a made-up clock: each test builds an
// in-process simulated exchange (exchange/sim) from a starting account,
// moves its index prices along input series, and ticks the daemon's own
// engine (engine.New, Tick(ctx, now)) every evaluation interval, comparing
// the rule states, actions and liquidations with the expected ones at given
// times. Nothing is re-implemented: the rules act on the simulated exchange
// through the same direct calls a backtest uses.
//
// A test file is YAML:
//
//	rule_files: [rules.example.yaml]   # rules or config files, relative to the test file
//	evaluation_interval: 1s            # default 1s; a test may set its own `interval`
//	tests:
//	  - name: over-max leverage is lowered
//	    seed: 1                        # seed of the simulated exchange's random walks; default 1
//	    scenario: default              # sim.DefaultScenario(), an inline scenario mapping
//	                                   # (the shape of `riskguard sim --scenario`), or a scenario file name
//	    input_series:                  # index prices; the others follow the scenario's own paths
//	      SOL: '150 150 145x3'         # one value per interval from 0s, promtool's expanding notation
//	      ETH: [{at: 0s, price: 2800}, {at: 10s, price: 2700}]   # or explicit steps
//	    expect:
//	      - at: 0s                     # the state after the tick at 0s
//	        firing: [{rule: over-max-leverage, symbol: XSOL}, {rule: liquidation-distance-5pct, symbol: XSOL}]
//	        pending: [{rule: liquidation-distance-10pct, symbol: XSOL}]
//	        actions:
//	          - {action: ACTION, symbol: XSOL, from: 15, leverage: 10}   # see rules.example.test.yaml
//	        notifications: [{rule: over-max-leverage}, {rule: liquidation-distance-5pct}]
//	        liquidations: []
//
// Series notation: `a` is one value, `_` leaves the price unchanged for one
// interval, `axn` is a repeated n+1 times, `a+bxn` and `a-bxn` are a, a±b, …,
// a±n·b (n+1 values). Explicit points set the price at `at` and hold it until
// the next point. A series is named by an index (SOL) or by an engine index
// name mapped in the config's index_names; an index the scenario lacks is
// added, starting at the series' first price.
//
// Expectations: every list given is compared as a whole with what the engine
// reports — missing and unexpected entries both fail — while a list left out
// is not checked. Inside an entry only the fields written are compared.
// firing, pending and nodata are the rules in that state after the tick at
// `at` (fields rule, symbol); actions are the mutating calls the tick made
// (action: the action kind, or the kinds joined by "+" when one settings
// call did several; symbol,
// leverage (after), from (before), cross, rules, outcome: sent, error or
// skipped); notifications are the tick's notify actions (rule, symbol);
// liquidations are every liquidation since the start (symbol, at, price).
// `at` must be a multiple of the interval; the test runs until its last
// expectation. The clock starts at Start.
package ruletest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/internal/yamlnode"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
	"gopkg.in/yaml.v3"
)

// Start is time 0s of every test: a fixed instant, so that results never
// depend on the wall clock.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Bounds, so that a typo cannot run for ever.
const (
	// MaxTicks is the most ticks one test may run.
	MaxTicks = 1_000_000
	// DefaultInterval is the evaluation interval of a file that sets none.
	DefaultInterval = time.Second
)

// Loader reads one rules or configuration file: its rules and the engine
// settings it holds (nil for a rules-only file). cmd passes its
// configuration loader, so that a test reads a config exactly as the daemon
// does.
type Loader func(path string) (*rules.Set, *engine.Config, error)

// Suite is a parsed test file with its rules loaded.
type Suite struct {
	// Path is the test file.
	Path string
	// RuleFiles are the rule files, resolved against the test file's
	// directory.
	RuleFiles []string
	// Rules are the rules of every rule file, in order.
	Rules *rules.Set
	// Engine is the engine configuration of the first config file among
	// the rule files (the defaults when all are rules-only); its DryRun,
	// AuditLog and StateFile are ignored: tests act on their own simulated
	// exchange and write no file.
	Engine engine.Config
	Tests  []*Test
}

// Test is one test of a file.
type Test struct {
	Name string
	// Line is where the test starts in its file.
	Line     int
	Interval time.Duration
	Seed     int64
	Scenario *sim.Scenario
	// Series are the index price series by name.
	Series map[string][]Point
	// Expect are the expectations in file order.
	Expect []*Expectation
}

// Point is a price an input series sets at an offset from the start.
type Point struct {
	At    time.Duration
	Price decimal.Decimal
}

// Expectation is what must hold after the tick at At. A nil list is not
// checked.
type Expectation struct {
	At   time.Duration
	Line int
	// Lists by kind: firing, pending, nodata, actions, notifications,
	// liquidations.
	Lists map[string][]Entry
}

// Entry is one expected item: the fields written, by name, in canonical
// text (numbers and booleans normalized, rules sorted).
type Entry struct {
	Line   int
	Fields map[string]string
}

// fieldKind is how a field's value is read and normalized.
type fieldKind int

const (
	kString fieldKind = iota
	kInt
	kBool
	kDecimal
	kDuration
	kList
)

type field struct {
	name string
	kind fieldKind
}

// The lists an expectation can hold, and their fields in display order.
var listFields = map[string][]field{
	"firing":        {{"rule", kString}, {"symbol", kString}},
	"pending":       {{"rule", kString}, {"symbol", kString}},
	"nodata":        {{"rule", kString}, {"symbol", kString}},
	"actions":       {{"action", kString}, {"symbol", kString}, {"leverage", kInt}, {"from", kInt}, {"cross", kBool}, {"quantity", kDecimal}, {"rules", kList}, {"outcome", kString}},
	"notifications": {{"rule", kString}, {"symbol", kString}},
	"liquidations":  {{"symbol", kString}, {"at", kDuration}, {"price", kDecimal}},
}

// listNames is the expectation lists in display order.
var listNames = []string{"firing", "pending", "nodata", "actions", "notifications", "liquidations"}

// Load reads the test file at path and loads its rule files with load.
// Problems of the file are returned together as a *rules.ErrorList, each as
// FILE:LINE:COL: message.
func Load(path string, load Loader) (*Suite, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read test file: %w", err)
	}
	p := &parser{file: path, dir: filepath.Dir(path)}
	s := p.parse(data)
	if len(p.errs) > 0 {
		return nil, &rules.ErrorList{Errors: p.errs}
	}
	if err := s.loadRules(load); err != nil {
		return nil, err
	}
	return s, nil
}

// loadRules loads and merges the rule files.
func (s *Suite) loadRules(load Loader) error {
	merged := &rules.Set{}
	seen := map[string]string{}
	found := false
	for _, f := range s.RuleFiles {
		set, cfg, err := load(f)
		if err != nil {
			return fmt.Errorf("%s: rule file %s: %w", s.Path, f, err)
		}
		if cfg != nil && !found {
			s.Engine, found = *cfg, true
		}
		for _, r := range set.Rules {
			if other, ok := seen[r.Name]; ok {
				return fmt.Errorf("%s: rule %q is in both %s and %s", s.Path, r.Name, other, f)
			}
			seen[r.Name] = f
			merged.Rules = append(merged.Rules, r)
		}
	}
	s.Rules = merged
	return nil
}

type parser struct {
	file, dir string
	errs      []*rules.Error
}

func (p *parser) errorf(n *yaml.Node, format string, args ...any) {
	e := &rules.Error{File: p.file, Line: 1, Col: 1, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Col = n.Line, n.Column
	}
	p.errs = append(p.errs, e)
}

// mapping walks a mapping node's keys, reporting unknown and duplicate
// keys, and returns the value nodes by key. It reports a non-mapping.
func (p *parser) mapping(n *yaml.Node, what string, known []string) (map[string]*yaml.Node, bool) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: expected a mapping, got %s", what, yamlnode.Describe(n))
		return nil, false
	}
	return yamlnode.Fields(n, "", known, func(at *yaml.Node, msg string) { p.errorf(at, "%s: %s", what, msg) }), true
}

func (p *parser) parse(data []byte) *Suite {
	s := &Suite{Path: p.file}
	if len(bytes.TrimSpace(data)) == 0 {
		p.errorf(nil, "empty file")
		return s
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.yamlError(err)
		return s
	}
	if len(doc.Content) == 0 {
		p.errorf(nil, "empty file")
		return s
	}
	top, ok := p.mapping(doc.Content[0], "test file", []string{"rule_files", "evaluation_interval", "tests"})
	if !ok {
		return s
	}
	interval := DefaultInterval
	if n := top["evaluation_interval"]; n != nil {
		interval = p.duration(n, "evaluation_interval", true)
	}
	if n := top["rule_files"]; n == nil {
		p.errorf(doc.Content[0], "rule_files: at least one rules or config file is required")
	} else {
		for _, f := range p.strings(n, "rule_files") {
			if !filepath.IsAbs(f) {
				f = filepath.Join(p.dir, f)
			}
			s.RuleFiles = append(s.RuleFiles, f)
		}
		if len(s.RuleFiles) == 0 && n.Kind == yaml.SequenceNode {
			p.errorf(n, "rule_files: at least one rules or config file is required")
		}
	}
	tn := top["tests"]
	if tn == nil || tn.Kind != yaml.SequenceNode || len(tn.Content) == 0 {
		at := doc.Content[0]
		if tn != nil {
			at = tn
		}
		p.errorf(at, "tests: a non-empty list of tests is required")
		return s
	}
	names := map[string]bool{}
	for i, n := range tn.Content {
		t := p.test(i, n, interval)
		if t == nil {
			continue
		}
		if names[t.Name] {
			p.errorf(n, "test %q: duplicate test name", t.Name)
		}
		names[t.Name] = true
		s.Tests = append(s.Tests, t)
	}
	return s
}

// yamlError reports a YAML syntax error at its line.
func (p *parser) yamlError(err error) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 1
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, after, ok := strings.Cut(rest, ":"); ok {
			if n, err := strconv.Atoi(num); err == nil {
				line, msg = n, strings.TrimSpace(after)
			}
		}
	}
	p.errs = append(p.errs, &rules.Error{File: p.file, Line: line, Col: 1, Msg: "invalid YAML: " + msg})
}

func (p *parser) test(i int, n *yaml.Node, interval time.Duration) *Test {
	what := fmt.Sprintf("tests[%d]", i)
	m, ok := p.mapping(n, what, []string{"name", "interval", "seed", "scenario", "input_series", "expect"})
	if !ok {
		return nil
	}
	t := &Test{Line: n.Line, Interval: interval, Seed: sim.DefaultSeed}
	if nn := m["name"]; nn == nil || nn.Kind != yaml.ScalarNode || strings.TrimSpace(nn.Value) == "" {
		p.errorf(n, "%s: name is required", what)
		t.Name = what
	} else {
		t.Name = nn.Value
		what = fmt.Sprintf("test %q", t.Name)
	}
	if v := m["interval"]; v != nil {
		t.Interval = p.duration(v, what+": interval", true)
	}
	if v := m["seed"]; v != nil {
		s, err := strconv.ParseInt(v.Value, 10, 64)
		if v.Kind != yaml.ScalarNode || err != nil {
			p.errorf(v, "%s: seed: expected an integer, got %s", what, yamlnode.Describe(v))
		}
		t.Seed = s
	}
	if v := m["scenario"]; v == nil {
		p.errorf(n, "%s: scenario is required: `default`, a scenario mapping or a scenario file", what)
	} else {
		t.Scenario = p.scenario(v, what)
	}
	if v := m["input_series"]; v != nil {
		t.Series = p.series(v, what, t.Interval)
	}
	en := m["expect"]
	if en == nil || en.Kind != yaml.SequenceNode || len(en.Content) == 0 {
		at := n
		if en != nil {
			at = en
		}
		p.errorf(at, "%s: expect: a non-empty list of expectations is required", what)
		return t
	}
	for _, e := range en.Content {
		if x := p.expectation(e, what, t.Interval); x != nil {
			t.Expect = append(t.Expect, x)
		}
	}
	return t
}

// scenario reads `default`, a file name or an inline scenario.
func (p *parser) scenario(n *yaml.Node, what string) *sim.Scenario {
	what += ": scenario"
	if n.Kind == yaml.ScalarNode {
		if n.Value == "default" {
			return sim.DefaultScenario()
		}
		f := n.Value
		if !filepath.IsAbs(f) {
			f = filepath.Join(p.dir, f)
		}
		sc, err := sim.LoadScenario(f)
		if err != nil {
			p.errorf(n, "%s: %v", what, err)
			return nil
		}
		return sc
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: expected `default`, a scenario mapping or a file name, got %s", what, yamlnode.Describe(n))
		return nil
	}
	before := len(p.errs)
	p.knownFields(n, what, typeOfScenario)
	if len(p.errs) > before {
		return nil
	}
	var sc sim.Scenario
	if err := n.Decode(&sc); err != nil {
		p.errorf(n, "%s: %s", what, strings.TrimPrefix(err.Error(), "yaml: "))
		return nil
	}
	// Validation happens once the input series have added their indexes.
	return &sc
}

// series reads the input series.
func (p *parser) series(n *yaml.Node, what string, interval time.Duration) map[string][]Point {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, "%s: input_series: expected a mapping of index name to prices, got %s", what, yamlnode.Describe(n))
		return nil
	}
	out := map[string][]Point{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		w := fmt.Sprintf("%s: input_series %s", what, k.Value)
		if _, dup := out[k.Value]; dup {
			p.errorf(k, "%s: duplicate series", w)
			continue
		}
		var pts []Point
		switch v.Kind {
		case yaml.ScalarNode:
			var err error
			if pts, err = ExpandSeries(v.Value, interval); err != nil {
				p.errorf(v, "%s: %v", w, err)
				continue
			}
		case yaml.SequenceNode:
			pts = p.points(v, w)
		default:
			p.errorf(v, "%s: expected values like '150 149 148x3' or a list of {at, price}, got %s", w, yamlnode.Describe(v))
			continue
		}
		if len(pts) == 0 {
			p.errorf(v, "%s: no price", w)
			continue
		}
		out[k.Value] = pts
	}
	return out
}

// points reads explicit {at, price} points.
func (p *parser) points(n *yaml.Node, what string) []Point {
	var pts []Point
	for _, e := range n.Content {
		m, ok := p.mapping(e, what, []string{"at", "price"})
		if !ok {
			continue
		}
		if m["at"] == nil || m["price"] == nil {
			p.errorf(e, "%s: each point needs at and price", what)
			continue
		}
		at := p.duration(m["at"], what+": at", false)
		price, err := decimal.NewFromString(m["price"].Value)
		if err != nil || !price.IsPositive() {
			p.errorf(m["price"], "%s: price: expected a positive number, got %s", what, yamlnode.Describe(m["price"]))
			continue
		}
		if len(pts) > 0 && at <= pts[len(pts)-1].At {
			p.errorf(m["at"], "%s: at %s is not after the previous point's %s", what, at, pts[len(pts)-1].At)
			continue
		}
		pts = append(pts, Point{At: at, Price: price})
	}
	return pts
}

// ExpandSeries expands promtool's notation into one point per interval from
// 0s: `a`, `_` (no change), `axn` (n+1 times a), `a+bxn` and `a-bxn`
// (a, a±b, …, a±n·b). Prices must stay positive.
func ExpandSeries(s string, interval time.Duration) ([]Point, error) {
	var pts []Point
	step := 0
	for _, tok := range strings.Fields(s) {
		if tok == "_" {
			step++
			continue
		}
		start, delta, times, err := parseToken(tok)
		if err != nil {
			return nil, err
		}
		if step+times >= MaxTicks {
			return nil, fmt.Errorf("more than %d values", MaxTicks)
		}
		for k := 0; k <= times; k++ {
			v := start.Add(delta.Mul(decimal.NewFromInt(int64(k))))
			if !v.IsPositive() {
				return nil, fmt.Errorf("%q: value %s is not a positive price", tok, v)
			}
			pts = append(pts, Point{At: time.Duration(step) * interval, Price: v})
			step++
		}
	}
	return pts, nil
}

// parseToken reads one of a, axn, a+bxn, a-bxn.
func parseToken(tok string) (start, delta decimal.Decimal, times int, err error) {
	bad := fmt.Errorf("%q: expected a number, _, axn or a+bxn", tok)
	base, rep, hasRep := strings.Cut(tok, "x")
	if hasRep {
		n, perr := strconv.Atoi(rep)
		if perr != nil || n < 0 {
			return start, delta, 0, bad
		}
		times = n
	}
	// The sign of b is the first + or - after a's first character.
	a, b := base, ""
	if i := strings.IndexAny(base[min(1, len(base)):], "+-"); i >= 0 {
		i++
		if !hasRep {
			return start, delta, 0, bad
		}
		a, b = base[:i], base[i:]
	}
	if start, err = decimal.NewFromString(a); err != nil {
		return start, delta, 0, bad
	}
	if b != "" {
		if delta, err = decimal.NewFromString(b); err != nil {
			return start, delta, 0, bad
		}
	}
	return start, delta, times, nil
}

func (p *parser) expectation(n *yaml.Node, what string, interval time.Duration) *Expectation {
	m, ok := p.mapping(n, what+": expect", append([]string{"at"}, listNames...))
	if !ok {
		return nil
	}
	x := &Expectation{Line: n.Line, Lists: map[string][]Entry{}}
	if m["at"] == nil {
		p.errorf(n, "%s: expect: at is required", what)
		return nil
	}
	x.At = p.duration(m["at"], what+": expect: at", false)
	if interval > 0 && x.At%interval != 0 {
		p.errorf(m["at"], "%s: expect: at %s is not a multiple of the interval %s", what, x.At, interval)
	}
	if x.At/max(interval, 1) >= MaxTicks {
		p.errorf(m["at"], "%s: expect: at %s is more than %d intervals away", what, x.At, MaxTicks)
	}
	for _, name := range listNames {
		ln := m[name]
		if ln == nil {
			continue
		}
		w := fmt.Sprintf("%s: expect at %s: %s", what, x.At, name)
		if ln.Kind != yaml.SequenceNode {
			p.errorf(ln, "%s: expected a list (write [] for none), got %s", w, yamlnode.Describe(ln))
			continue
		}
		entries := []Entry{}
		for _, e := range ln.Content {
			if en, ok := p.entry(e, w, listFields[name]); ok {
				entries = append(entries, en)
			}
		}
		x.Lists[name] = entries
	}
	if len(m) == 1 {
		p.errorf(n, "%s: expect at %s: nothing to check: give %s", what, x.At, strings.Join(listNames, ", "))
	}
	return x
}

// entry reads one expected item and normalizes its fields.
func (p *parser) entry(n *yaml.Node, what string, fields []field) (Entry, bool) {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	m, ok := p.mapping(n, what, names)
	if !ok {
		return Entry{}, false
	}
	e := Entry{Line: n.Line, Fields: map[string]string{}}
	for _, f := range fields {
		v := m[f.name]
		if v == nil {
			continue
		}
		w := what + ": " + f.name
		if f.kind == kList {
			list := p.strings(v, w)
			slices.Sort(list)
			e.Fields[f.name] = strings.Join(list, ",")
			continue
		}
		if v.Kind != yaml.ScalarNode {
			p.errorf(v, "%s: expected a value, got %s", w, yamlnode.Describe(v))
			continue
		}
		switch f.kind {
		case kString:
			e.Fields[f.name] = v.Value
		case kInt:
			i, err := strconv.Atoi(v.Value)
			if err != nil {
				p.errorf(v, "%s: expected an integer, got %s", w, yamlnode.Describe(v))
			}
			e.Fields[f.name] = strconv.Itoa(i)
		case kBool:
			b, err := strconv.ParseBool(v.Value)
			if err != nil {
				p.errorf(v, "%s: expected true or false, got %s", w, yamlnode.Describe(v))
			}
			e.Fields[f.name] = strconv.FormatBool(b)
		case kDecimal:
			d, err := decimal.NewFromString(v.Value)
			if err != nil {
				p.errorf(v, "%s: expected a number, got %s", w, yamlnode.Describe(v))
			}
			e.Fields[f.name] = d.String()
		case kDuration:
			e.Fields[f.name] = p.duration(v, w, false).String()
		}
	}
	if len(e.Fields) == 0 && len(m) == 0 {
		p.errorf(n, "%s: an entry needs at least one of %s", what, strings.Join(names, ", "))
		return e, false
	}
	return e, true
}

// duration reads a Go duration; positive when asked, else not negative.
func (p *parser) duration(n *yaml.Node, what string, positive bool) time.Duration {
	d, err := yamlnode.Duration(n)
	switch {
	case err != nil:
		p.errorf(n, "%s: %v", what, err)
	case positive && d == 0:
		p.errorf(n, "%s: must be positive, got %s", what, d)
	default:
		return d
	}
	if positive {
		return DefaultInterval
	}
	return 0
}

// strings reads a string or a list of strings.
func (p *parser) strings(n *yaml.Node, what string) []string {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return []string{n.Value}
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			if e.Kind != yaml.ScalarNode {
				p.errorf(e, "%s: expected a string, got %s", what, yamlnode.Describe(e))
				continue
			}
			out = append(out, e.Value)
		}
		return out
	}
	p.errorf(n, "%s: expected a list of strings, got %s", what, yamlnode.Describe(n))
	return nil
}
