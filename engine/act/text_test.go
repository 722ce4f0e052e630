package act

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
)

// The reasons' figures are fmt's: appendFixed is %.Nf and appendSigned
// %+.Nf, for the values a reason meets and the ones it should not.
func TestFixedIsFmt(t *testing.T) {
	t.Parallel()
	values := []float64{0, math.Copysign(0, -1), 1, -1, 0.005, 0.015, 0.025, -0.005, 2.675, 1e-9, -1e-9, 123456789.125,
		1e21, -1e21, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Inf(-1), math.NaN()}
	r := rand.New(rand.NewPCG(38, 11))
	for range 20000 {
		values = append(values, (r.Float64()-0.5)*math.Pow(10, float64(r.IntN(16)-6)))
	}
	for _, x := range values {
		for prec := range 4 {
			if got, want := string(appendFixed(nil, x, prec)), fmt.Sprintf("%.*f", prec, x); got != want {
				t.Fatalf("appendFixed(%v, %d) = %q, fmt %q", x, prec, got, want)
			}
			if got, want := string(appendSigned([]byte("at "), x, prec)), fmt.Sprintf("at %+.*f", prec, x); got != want {
				t.Fatalf("appendSigned(%v, %d) = %q, fmt %q", x, prec, got, want)
			}
		}
	}
	for _, w := range []exchange.Settings{{Leverage: 5, Cross: true}, {Leverage: 20}, {Leverage: 0}, {Leverage: -3, Cross: true}} {
		mode := "cross"
		if !w.Cross {
			mode = "isolated"
		}
		if got, want := string(appendSettings(nil, w)), fmt.Sprintf("%s at %dx", mode, w.Leverage); got != want {
			t.Fatalf("appendSettings(%+v) = %q, want %q", w, got, want)
		}
	}
}

// nearest says what fmt said: the part most likely lost, its symbols,
// side or pool, family and figures.
func TestNearestIsTheFmtText(t *testing.T) {
	t.Parallel()
	ref := func(f margin.Forfeit) string {
		var best *margin.ForfeitPart
		for i := range f.Parts {
			p := &f.Parts[i]
			if best == nil || p.Weight*p.Prob*p.Amount > best.Weight*best.Prob*best.Amount {
				best = p
			}
		}
		if best == nil {
			return ""
		}
		what := strings.Join(best.Symbols, "+")
		if best.Direction != "" {
			what += " " + best.Direction
		} else {
			what = "the cross pool (" + what + ")"
		}
		if best.Family == "" {
			return fmt.Sprintf("%s is past its liquidation point: %.2f lost", what, best.Amount)
		}
		return fmt.Sprintf("%s: %.1f%% to touch its liquidation point at %+.1fσ (%s) and lose %.2f", what, best.Prob*100, best.K, best.Family, best.Amount)
	}
	r := rand.New(rand.NewPCG(38, 12))
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	if got := nearest(margin.Forfeit{}); got != "" {
		t.Fatalf("no parts: %q", got)
	}
	for range 2000 {
		var f margin.Forfeit
		for range 1 + r.IntN(4) {
			syms := []string{pick("XBTC", "XETH", "<b>x</b>", "")}
			for range r.IntN(3) {
				syms = append(syms, pick("XSOL", "XADA"))
			}
			f.Parts = append(f.Parts, margin.ForfeitPart{Symbols: syms, Direction: pick("", "LONG", "SHORT"), Family: pick("", "together", "XBTC"),
				K: (r.Float64() - 0.5) * 10, Prob: r.Float64(), Weight: r.Float64(), Amount: r.Float64() * 1e5})
		}
		if got, want := nearest(f), ref(f); got != want {
			t.Fatalf("nearest = %q, fmt %q", got, want)
		}
	}
}
