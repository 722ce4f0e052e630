package margin

import (
	"math"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
)

func sigmaOf(s float64) func(string) float64 { return func(string) float64 { return s } }

// An isolated long 6.1667% from its liquidation price (XSOL: 140.75 at
// 150), σ 2%: the first move of the grid that liquidates it is −3.1σ
// (−6.2%). Within ±3σ nothing is fatal; within ±3.5σ that move is. The
// expected loss is half of it from the moves together and half from XSOL
// alone, the same moves here: its equity (margin 4,000, PNL 0) times the
// mass the grid's points from −3.1σ down weigh (Student's t, 3 degrees of
// freedom, at unit variance: 0.6408%), 25.63.
func TestStressIsolated(t *testing.T) {
	t.Parallel()
	a := Account{Free: dec("3000"), Positions: []Position{xsol(false)}}
	s := a.Stress(sigmaOf(0.02), 3, nil)
	if !s.Known || len(s.Fatal) != 0 {
		t.Fatalf("±3σ: %+v, want known and nothing fatal", s)
	}
	if math.Abs(s.Expected-25.63) > 0.01 {
		t.Errorf("expected loss %.3f, want 25.63", s.Expected)
	}
	s = a.Stress(sigmaOf(0.02), 3.5, nil)
	f, ok := s.FatalFor("XSOL", exchange.Long)
	if !ok || math.Abs(f.K+3.1) > 1e-9 || math.Abs(f.Move+0.062) > 1e-9 || f.Family != StressTogether {
		t.Errorf("±3.5σ: fatal %+v (%t), want −3.1σ, −6.2%%, together first", f, ok)
	}
	if got := f.String(); got != "−6.20% (-3.1σ, every index together) liquidates XSOL LONG" {
		t.Errorf("said %q", got)
	}
	// The shown points: −4σ and −5σ lose the equity, the others nothing.
	for _, p := range s.Points {
		want := 0.0
		if p.K <= -4 {
			want = 4000
		}
		if p.Loss != want {
			t.Errorf("%s %gσ: loss %v, want %v", p.Family, p.K, p.Loss, want)
		}
	}
}

// The thin cross account of issue 31: XBTC long 0.5 ×20 and XSOL long 200
// ×10 on cross, 3,000 free, BTC at 64,100. Together in one pool a likely
// move (σ 2%, ±3σ) liquidates nothing (XBTC 21% away); XBTC isolated at
// 20× sits 3.2% from its liquidation price (50,375 → 62,075), and a likely
// move of −1.6σ liquidates it: a move the account survived before made
// fatal, and the expected loss grows.
func TestStressThinCrossIsolation(t *testing.T) {
	t.Parallel()
	btc := Position{Symbol: "XBTC", Direction: exchange.Long, Quantity: dec("0.5"), Entry: dec("65000"), Leverage: 20,
		Cross: true, RiskLimit: rl(50, "0.005"), Index: dec("64100"), Scale: 2}
	sol := Position{Symbol: "XSOL", Direction: exchange.Long, Quantity: dec("200"), Entry: dec("150"), Leverage: 10,
		Cross: true, RiskLimit: rl(20, "0.005"), Index: dec("150"), Scale: 2}
	before := Account{Free: dec("3000"), Positions: []Position{btc, sol}}
	after, eff := before.Apply(0, 20, false)
	sb, sa := before.Stress(sigmaOf(0.02), 3, nil), after.Stress(sigmaOf(0.02), 3, nil)
	if len(sb.Fatal) != 0 {
		t.Fatalf("before: %s", sb.Summary())
	}
	nf := NewlyFatal(sb, sa, "")
	if len(nf) != 1 || nf[0].Symbol != "XBTC" || nf[0].K != -1.6 {
		t.Fatalf("newly fatal %+v (liquidation %s → %s); after: %s", nf, eff.LiquidationBefore, eff.LiquidationAfter, sa.Summary())
	}
	if !(sa.Expected > sb.Expected) {
		t.Errorf("expected loss %.2f → %.2f: want it to grow", sb.Expected, sa.Expected)
	}
	if len(NewlyFatal(sb, sa, "XBTC")) != 0 {
		t.Error("the ring-fenced position itself is not excepted")
	}
	if s := sa.Summary(); !strings.Contains(s, "liquidates XBTC LONG") || !strings.Contains(s, "σ XBTC 2.00%, XSOL 2.00%") {
		t.Errorf("summary %q", s)
	}
}

// No index price, or no σ, is no judgement.
func TestStressUnknown(t *testing.T) {
	t.Parallel()
	p := xsol(false)
	p.Index = dec("0")
	if s := (Account{Positions: []Position{p}}).Stress(sigmaOf(0.02), 3, nil); s.Known {
		t.Error("known without an index price")
	}
	if s := (Account{Positions: []Position{xsol(false)}}).Stress(sigmaOf(0), 3, nil); s.Known {
		t.Error("known without σ")
	}
}
