package act_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/act"
	"github.com/riskguard/riskguard/engine/backtest"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// trimLeverage is an action kind this file registers and nothing else
// knows: it brings the position's leverage down to what its leverage
// expression gives, in a settings call of its own sent after the shipped
// kinds' calls. It is the proof that a kind is one file and one row: the
// rules' loader, the engine, the exchange call, the audit log and the
// backtest take it from its Kind alone.
type trimLeverage struct{}

const trimName rules.ActionKind = "trim_leverage"

func (trimLeverage) Name() rules.ActionKind { return trimName }

func (trimLeverage) Spec() rules.KindSpec {
	return rules.KindSpec{Name: trimName, Params: rules.ParamLeverage, Repeatable: true, Call: rules.CallSettings,
		Missing: `"leverage" (the leverage to trim to)`, Noun: "trim", Nouns: "trims"}
}

func (trimLeverage) Merge(pl *act.Plan, d *act.Due, a *rules.Action, ev *rules.Evaluator, env *rules.Env) {
	lev, err := ev.TargetLeverage(a, env)
	if err != nil {
		d.Err = fmt.Errorf("trim target: %w", err)
		return
	}
	s := pl.Step(string(trimName), func() act.Step { return &trimStep{} }).(*trimStep)
	if s.to == 0 || lev < s.to {
		s.to = lev
	}
	s.rules = append(s.rules, d.Rule.Name)
	d.Ask(s)
}

// trimStep is a plan's trim: the lowest leverage its rules asked for.
type trimStep struct {
	to    int
	rules []string
	p     *act.Pending
	err   error
}

func (*trimStep) Order() int { return 40 }

func (s *trimStep) Prepare(ctx context.Context, h act.Host, pl *act.Plan) ([]*act.Pending, error) {
	pos, sym := pl.Pos, pl.Sym.Name
	if s.to < 1 || s.to >= pos.Leverage {
		return nil, nil
	}
	want := exchange.Settings{Cross: pos.Cross, Leverage: s.to}
	base := journal.Record{Time: h.Now(), Type: "action", Action: string(trimName), Symbol: sym, Position: pos.ID, Rules: s.rules,
		Leverage: s.to, PrevLeverage: pos.Leverage}
	ev := &journal.ActionEvent{Symbol: sym, Action: string(trimName), Rules: s.rules, From: pos.Leverage, To: s.to}
	x := h.Exchange()
	s.p, s.err = h.Prepare(ctx, base, fmt.Sprintf("%s %s %d→%d", trimName, sym, pos.Leverage, s.to), "", ev,
		func(ctx context.Context) (json.RawMessage, error) {
			got, err := x.SetPositionSettings(ctx, sym, want)
			if err != nil {
				return nil, err
			}
			return json.Marshal(got)
		})
	if s.p == nil {
		return nil, s.err
	}
	return []*act.Pending{s.p}, nil
}

func (s *trimStep) Done(ctx context.Context, h act.Host, pl *act.Plan) error {
	if s.p != nil {
		s.err = h.Finish(s.p)
		h.Outcome(ctx, pl.Sym.Name, s.err)
	}
	return s.err
}

// withTrim is the shipped kinds and trimLeverage, made afresh.
func withTrim() act.Kinds { return append(act.DefaultKinds(), trimLeverage{}) }

const trimRules = `
rules:
  - name: trim
    when: position.leverage > riskLimit.maxLeverage
    cooldown: 5m
    actions:
      - action: trim_leverage
        leverage: riskLimit.maxLeverage
`

// A kind registered in this file alone is parsed, decided, sent through
// the simulated exchange over HTTP, audited and backtested.
func TestRegisteredKindEndToEnd(t *testing.T) {
	t.Parallel()
	kinds := withTrim()

	// Parse: the shipped table refuses the kind; the extended one takes
	// it, and its parameter errors name it.
	if _, err := rules.Parse("trim.yaml", []byte(trimRules)); err == nil || !strings.Contains(err.Error(), "trim_leverage") {
		t.Fatalf("the shipped kinds parse trim_leverage: %v", err)
	}
	set, err := rules.ParseWith("trim.yaml", []byte(trimRules), kinds.Table())
	if err != nil {
		t.Fatalf("parse with the registered kind: %v", err)
	}
	_, err = rules.ParseWith("bad.yaml", []byte("rules:\n  - name: t\n    when: \"true\"\n    actions: [{action: trim_leverage}]\n"), kinds.Table())
	if err == nil || !strings.Contains(err.Error(), `trim_leverage: missing parameter "leverage" (the leverage to trim to)`) {
		t.Errorf("a trim without its leverage: %v", err)
	}

	// Decide and send, over HTTP: the default scenario's XSOL is at 15×,
	// over its risk limit's 10×.
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	client := overHTTP(t, ex)
	if _, err := engine.New(engine.Config{}, set, engine.Deps{Reader: client, Actuator: client}); err == nil ||
		!strings.Contains(err.Error(), "knows no such action kind") {
		t.Fatalf("an engine without the kind took a set using it: %v", err)
	}
	var audit bytes.Buffer
	e, err := engine.New(engine.Config{}, set, engine.Deps{Reader: client, Actuator: client, Kinds: kinds, Audit: journal.NewAudit(&audit)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rep, err := e.Tick(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ps, err := client.Positions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := false
	for _, p := range ps {
		if p.SymbolID == xsolID(t, ex) {
			trimmed = p.Leverage == 10
		}
	}
	if !trimmed {
		t.Errorf("XSOL not trimmed to 10× on the exchange: %+v", ps)
	}
	var sent bool
	for _, a := range rep.Actions {
		sent = sent || a.Action == string(trimName) && a.Symbol == "XSOL" && a.Outcome == "sent" && a.From == 15 && a.To == 10
	}
	if !sent {
		t.Errorf("the tick's report has no trim of XSOL 15→10: %+v", rep.Actions)
	}
	var phases []string
	for _, line := range strings.Split(strings.TrimSpace(audit.String()), "\n") {
		var r journal.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if r.Action == string(trimName) {
			phases = append(phases, r.Phase)
		}
	}
	if got := strings.Join(phases, ","); got != "intended,sent,result" {
		t.Errorf("audited trim phases %q, want intended,sent,result; log:\n%s", got, audit.String())
	}

	// Backtest: on SOL's dip through XSOL's liquidation price at 15×, the
	// trim saves it as a leverage cut would, and the run without the guard
	// only says it.
	res, err := backtest.Run(ctx, solDip(), backtest.Options{Rules: set, Scenario: sim.DefaultScenario(), Kinds: withTrim})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unguarded.Liquidations) != 1 || len(res.Guarded.Liquidations) != 0 {
		t.Errorf("liquidations without %+v, with %+v; want XSOL's avoided", res.Unguarded.Liquidations, res.Guarded.Liquidations)
	}
	if len(res.Guarded.Rules) != 1 || res.Guarded.Rules[0].Actions != 1 || res.Unguarded.Rules[0].Actions != 1 {
		t.Errorf("rule stats with %+v, without %+v; want one trim each", res.Guarded.Rules, res.Unguarded.Rules)
	}
	marked := false
	for _, s := range res.Symbols {
		for _, m := range s.Markers {
			marked = marked || s.Symbol == "XSOL" && m.Action == string(trimName) && m.From == 15 && m.To == 10
		}
	}
	if !marked {
		t.Errorf("no trim marker on XSOL's chart")
	}
	var page bytes.Buffer
	if err := backtest.WriteReport(&page, res); err != nil || !strings.Contains(page.String(), string(trimName)) {
		t.Errorf("the report does not name the trim (err %v)", err)
	}
}

// overHTTP serves h (the simulated exchange, or a proxy of it) on loopback
// for the test and returns the real client of it, with the sim's key pair.
func overHTTP(t *testing.T, h http.Handler, opts ...exchange.Option) *exchange.Client {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := exchange.New(srv.URL, "k", "s", append([]exchange.Option{exchange.WithRateLimit(0, 0)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// xsolID is the simulated exchange's id of XSOL's contract.
func xsolID(t *testing.T, ex *sim.Exchange) int64 {
	t.Helper()
	syms, err := ex.Local().Trades(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms.ContractsSymbols {
		if s.Name == "XSOL" {
			return s.ID
		}
	}
	t.Fatal("no XSOL contract")
	return 0
}

// solDip is SOL from 150 down to 144.5 (past XSOL's liquidation price at
// 15×, 144.907) and back, a step a second for 100 seconds.
func solDip() backtest.Source {
	src := &steps{}
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	for s := 0; s <= 100; s++ {
		p := 150 - 5.5*float64(min(s, 70))/70 + 6*float64(max(s-70, 0))/30
		src.list = append(src.list, backtest.Step{Time: t0.Add(time.Duration(s) * time.Second),
			Prices: map[string]decimal.Decimal{"SOL": decimal.NewFromFloat(p).Round(3)}})
	}
	return src
}

type steps struct{ list []backtest.Step }

func (s *steps) Next() (backtest.Step, error) {
	if len(s.list) == 0 {
		return backtest.Step{}, io.EOF
	}
	st := s.list[0]
	s.list = s.list[1:]
	return st, nil
}
