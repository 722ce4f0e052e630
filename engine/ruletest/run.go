package ruletest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Result is the outcome of one test.
type Result struct {
	File, Test string
	// Line is where the test starts.
	Line int
	// Failures are the expectations that did not hold, in time order.
	Failures []Failure
	// Err is set when the test could not run (a bad scenario, an engine
	// that would not start, a tick that failed).
	Err error
}

// Passed reports whether the test ran and every expectation held.
func (r *Result) Passed() bool { return r.Err == nil && len(r.Failures) == 0 }

// Failure is one expected list that differs from what the engine did.
type Failure struct {
	At   time.Duration
	Line int
	// List is firing, pending, nodata, actions, notifications or
	// liquidations.
	List string
	// Expected and Got are the whole lists, Missing and Unexpected the
	// entries that found no partner, each written as a flow mapping that
	// can be pasted into the test file.
	Expected, Got, Missing, Unexpected []string
}

// Run runs the tests whose name match accepts (nil: all) in file order.
// ctx cancels between ticks.
func (s *Suite) Run(ctx context.Context, match func(string) bool) []Result {
	var out []Result
	for _, t := range s.Tests {
		if match != nil && !match(t.Name) {
			continue
		}
		r := Result{File: s.Path, Test: t.Name, Line: t.Line}
		r.Failures, r.Err = s.run(ctx, t)
		out = append(out, r)
	}
	return out
}

// clock is a test's made-up time, read by the exchange and the engine.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// run ticks one test to its last expectation.
func (s *Suite) run(ctx context.Context, t *Test) ([]Failure, error) {
	sc, alias, err := s.prepare(t)
	if err != nil {
		return nil, err
	}
	clk := &clock{t: Start}
	ex, err := sim.New(sim.Config{Key: "ruletest", Secret: "ruletest", Seed: t.Seed, Now: clk.now, Scenario: sc})
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	cfg := s.Engine
	cfg.Interval = t.Interval
	cfg.DryRun, cfg.AuditLog, cfg.StateFile = false, "", ""
	d := ex.Local()
	eng, err := engine.New(cfg, s.Rules, engine.Deps{Reader: d, Actuator: d, Now: clk.now})
	if err != nil {
		return nil, err
	}
	defer eng.Close()

	expect := slices.Clone(t.Expect)
	slices.SortStableFunc(expect, func(a, b *Expectation) int { return cmp.Compare(a.At, b.At) })
	last := expect[len(expect)-1].At
	next := map[string]int{} // series name → its next point
	var failures []Failure
	for step := range MaxTicks {
		if err := ctx.Err(); err != nil {
			return failures, err
		}
		at := time.Duration(step) * t.Interval
		if at > last {
			break
		}
		clk.t = Start.Add(at)
		prices := map[string]decimal.Decimal{}
		for name, pts := range t.Series {
			i := next[name]
			for i < len(pts) && pts[i].At <= at {
				prices[name] = pts[i].Price
				if base, ok := alias[name]; ok {
					prices[base] = pts[i].Price
				}
				i++
			}
			next[name] = i
		}
		if len(prices) > 0 {
			ex.SetIndexPrices(prices)
		}
		ex.Step(clk.t)
		rep, err := eng.Tick(ctx, clk.t)
		if err != nil {
			return failures, fmt.Errorf("tick at %s: %w", at, err)
		}
		for len(expect) > 0 && expect[0].At == at {
			failures = append(failures, check(expect[0], observe(eng, rep, ex))...)
			expect = expect[1:]
		}
	}
	return failures, nil
}

// prepare copies the test's scenario, holds every index with a series at
// the series' first price (adding the ones it lacks) and validates it. alias
// maps an engine index name (index_names) to the exchange's index it moves.
func (s *Suite) prepare(t *Test) (*sim.Scenario, map[string]string, error) {
	if t.Scenario == nil {
		return nil, nil, fmt.Errorf("no scenario")
	}
	sc := *t.Scenario
	sc.Indexes = slices.Clone(sc.Indexes)
	bases := map[string]string{} // contract base → a contract on it
	for _, c := range sc.Contracts {
		bases[c.Base] = c.Name
	}
	alias := map[string]string{}
	for sym, ix := range s.Engine.IndexNames {
		for _, c := range sc.Contracts {
			if c.Name == sym && c.Base != ix {
				alias[ix] = c.Base
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(t.Series)) {
		first := t.Series[name][0].Price
		target := name
		if base, ok := alias[name]; ok {
			target = base
		}
		for _, c := range sc.Contracts {
			if c.Name == name {
				return nil, nil, fmt.Errorf("input_series %s: name the index, not the contract: the index of %s is %s", name, name, c.Base)
			}
		}
		found := false
		for i, ix := range sc.Indexes {
			if ix.Name == target {
				sc.Indexes[i] = sim.IndexSpec{Name: ix.Name, Scale: ix.Scale, Points: []sim.PricePoint{{Price: first}}}
				found = true
			}
		}
		if !found {
			if _, ok := bases[target]; !ok {
				return nil, nil, fmt.Errorf("input_series %s: no contract of the scenario is priced by index %s", name, name)
			}
			sc.Indexes = append(sc.Indexes, sim.IndexSpec{Name: target, Points: []sim.PricePoint{{Price: first}}})
		}
	}
	if err := sc.Validate(); err != nil {
		return nil, nil, fmt.Errorf("scenario: %w", err)
	}
	return &sc, alias, nil
}

// observed is what the engine and the exchange show after a tick, by list.
type observed map[string][]map[string]string

func observe(eng *engine.Engine, rep *engine.TickReport, ex *sim.Exchange) observed {
	o := observed{}
	for _, name := range listNames {
		o[name] = []map[string]string{}
	}
	for _, a := range eng.Active() {
		list := a.State.String()
		o[list] = append(o[list], map[string]string{"rule": a.Rule, "symbol": a.Symbol})
	}
	for _, a := range rep.Actions {
		if a.Action == string(rules.Notify) {
			for _, r := range a.Rules {
				o["notifications"] = append(o["notifications"], map[string]string{"rule": r, "symbol": a.Symbol})
			}
			continue
		}
		names := slices.Clone(a.Rules)
		slices.Sort(names)
		m := map[string]string{"action": a.Action, "symbol": a.Symbol, "rules": strings.Join(names, ","), "outcome": a.Outcome}
		if a.To != 0 {
			m["leverage"] = strconv.Itoa(a.To)
			m["from"] = strconv.Itoa(a.From)
			m["cross"] = strconv.FormatBool(a.Cross)
		}
		if !a.Quantity.IsZero() {
			m["quantity"] = a.Quantity.String()
		}
		o["actions"] = append(o["actions"], m)
	}
	for _, l := range ex.Liquidations() {
		o["liquidations"] = append(o["liquidations"], map[string]string{"symbol": l.Symbol, "at": l.Time.Sub(Start).String(),
			"price": l.Price.String()})
	}
	return o
}

// check compares one expectation with what was observed.
func check(x *Expectation, o observed) []Failure {
	var out []Failure
	for _, name := range listNames {
		want, ok := x.Lists[name]
		if !ok {
			continue
		}
		got := o[name]
		missing, unexpected := match(want, got)
		if len(missing) == 0 && len(unexpected) == 0 {
			continue
		}
		f := Failure{At: x.At, Line: x.Line, List: name}
		for _, e := range want {
			f.Expected = append(f.Expected, format(name, e.Fields))
		}
		for _, g := range got {
			f.Got = append(f.Got, format(name, g))
		}
		for _, i := range missing {
			f.Missing = append(f.Missing, format(name, want[i].Fields))
		}
		for _, j := range unexpected {
			f.Unexpected = append(f.Unexpected, format(name, got[j]))
		}
		out = append(out, f)
	}
	return out
}

// match pairs expected entries with observed items (an entry matches an
// item when every field it names is equal), as many as possible, and
// returns the indexes of the entries and items left without a partner.
// The pairing is a maximum bipartite matching, so that a loose entry does
// not take the item a stricter one needed.
func match(want []Entry, got []map[string]string) (missing, unexpected []int) {
	owner := make([]int, len(got)) // got index → want index, -1 if free
	for j := range owner {
		owner[j] = -1
	}
	fits := func(i, j int) bool {
		for k, v := range want[i].Fields {
			if got[j][k] != v {
				return false
			}
		}
		return true
	}
	var augment func(i int, seen []bool) bool
	augment = func(i int, seen []bool) bool {
		for j := range got {
			if seen[j] || !fits(i, j) {
				continue
			}
			seen[j] = true
			if owner[j] < 0 || augment(owner[j], seen) {
				owner[j] = i
				return true
			}
		}
		return false
	}
	for i := range want {
		if !augment(i, make([]bool, len(got))) {
			missing = append(missing, i)
		}
	}
	for j, i := range owner {
		if i < 0 {
			unexpected = append(unexpected, j)
		}
	}
	return missing, unexpected
}

// format writes an item as a YAML flow mapping, fields in schema order.
func format(list string, m map[string]string) string {
	var parts []string
	for _, f := range listFields[list] {
		v, ok := m[f.name]
		if !ok {
			continue
		}
		if f.kind == kList {
			v = "[" + strings.ReplaceAll(v, ",", ", ") + "]"
		}
		parts = append(parts, f.name+": "+v)
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Report writes the results of one file: each failing test with its diffs.
// It returns the numbers of tests run and failed.
func Report(w io.Writer, results []Result) (run, failed int) {
	for i := range results {
		r := &results[i]
		run++
		if r.Passed() {
			continue
		}
		failed++
		if r.Err != nil {
			fmt.Fprintf(w, "FAIL %s:%d: test %q: %v\n", r.File, r.Line, r.Test, r.Err)
			continue
		}
		for _, f := range r.Failures {
			fmt.Fprintf(w, "FAIL %s:%d: test %q at %s: %s\n", r.File, f.Line, r.Test, f.At, f.List)
			fmt.Fprintf(w, "    expected: %s\n", list(f.Expected))
			fmt.Fprintf(w, "    got:      %s\n", list(f.Got))
			for _, m := range f.Missing {
				fmt.Fprintf(w, "    - missing:    %s\n", m)
			}
			for _, u := range f.Unexpected {
				fmt.Fprintf(w, "    + unexpected: %s\n", u)
			}
		}
	}
	return run, failed
}

func list(items []string) string {
	if len(items) == 0 {
		return "[]"
	}
	return "[" + strings.Join(items, ", ") + "]"
}
