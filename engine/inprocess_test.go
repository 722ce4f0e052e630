package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// inProcess is a fakeExchange that says its reads are in-process, and logs
// the order of its reads.
type inProcess struct {
	*fakeExchange
	mu    sync.Mutex
	order []string
}

var _ market.InProcessReader = (*inProcess)(nil)

func (p *inProcess) InProcess() bool { return true }

func (p *inProcess) log(call string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.order = append(p.order, call)
}

func (p *inProcess) IndexPrices(ctx context.Context) (map[string]decimal.Decimal, error) {
	p.log("indexPrices")
	return p.fakeExchange.IndexPrices(ctx)
}

func (p *inProcess) Positions(ctx context.Context) ([]exchange.Position, error) {
	p.log("positions")
	return p.fakeExchange.Positions(ctx)
}

// TestInProcessReaderSameTicks: an engine reading from an InProcessReader
// (index prices, then positions, on the tick's goroutine) decides exactly as
// one reading concurrently, through healthy ticks, an index outage and a
// positions outage, and writes the same audit log.
func TestInProcessReaderSameTicks(t *testing.T) {
	t.Parallel()
	type outcome struct {
		reports []string
		audit   string
	}
	run := func(t *testing.T, wrap bool) (outcome, *inProcess) {
		fx := newFake()
		var reader market.Reader = fx
		var ip *inProcess
		if wrap {
			ip = &inProcess{fakeExchange: fx}
			reader = ip
		}
		set := &rules.Set{Rules: []*rules.Rule{rule(t, overMax), rule(t, nearLiq), rule(t, veryNearLiq)}}
		audit := new(bytes.Buffer)
		e, err := New(Config{}, set, Deps{Reader: reader, Actuator: fx, Audit: journal.NewAudit(audit)})
		if err != nil {
			t.Fatal(err)
		}
		var out outcome
		steps := []func(){
			func() {},
			func() { fx.setIndex("ETH", "3400") }, // near liquidation
			func() { fx.mu.Lock(); fx.idxErr = errDown; fx.mu.Unlock() },
			func() { fx.mu.Lock(); fx.idxErr, fx.posErr = nil, errDown; fx.mu.Unlock() },
			func() { fx.mu.Lock(); fx.posErr = nil; fx.mu.Unlock(); fx.setIndex("ETH", "3540") },
			func() { fx.setIndex("ETH", "3000") },
		}
		for i, step := range steps {
			step()
			rep, err := e.Tick(context.Background(), at(10*i))
			out.reports = append(out.reports, fmt.Sprintf("err %v incomplete %v: %d positions, %d evaluations, %+v, %+v",
				err, errors.Is(err, market.ErrIncomplete), rep.Positions, rep.Evaluations, rep.Transitions, rep.Actions))
		}
		out.audit = audit.String()
		return out, ip
	}
	want, _ := run(t, false)
	got, ip := run(t, true)
	if !slices.Equal(got.reports, want.reports) {
		t.Errorf("in-process ticks differ:\n got %q\nwant %q", got.reports, want.reports)
	}
	if got.audit != want.audit {
		t.Errorf("in-process audit differs:\n got %s\nwant %s", got.audit, want.audit)
	}
	// One after the other: index prices first, every tick.
	ip.mu.Lock()
	defer ip.mu.Unlock()
	for i := 0; i+1 < len(ip.order); i += 2 {
		if ip.order[i] != "indexPrices" || ip.order[i+1] != "positions" {
			t.Fatalf("read order = %v, want indexPrices then positions at each tick", ip.order)
		}
	}
	if len(ip.order) != 12 {
		t.Errorf("%d reads, want 12: %v", len(ip.order), ip.order)
	}
}
