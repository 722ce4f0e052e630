package act_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// An order answered FILLED while the positions listing still shows the
// position as before it for the next reads (a read model behind the
// matching engine): the fill is the order's truth. One fill per decision;
// the lag is said once; a listing that never agrees within
// engine.listing_lag is an inconsistency of the exchange, said critically,
// and no order goes out on the symbol until a listing agrees. Before, the
// answer's fill was taken for "settings not applied", backed off and sent
// again: XSOL 400 → 100 in two fills for a decision to halve it (issue 37).
func TestFilledAnswerThenLaggingListing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		cooldown string
		lags     int
		want     []string
		not      []string
	}{
		{name: "lags two reads", cooldown: "10m", lags: 2,
			want: []string{`"phase":"result"`, `"phase":"lagged"`, "the positions listing lagged order", "and showed 200 at the 2nd read after"},
			not:  []string{"settings not applied", `"phase":"error"`, "INCONSISTENT", "without an order of the guard"}},
		// The cooldown ends while the listing still disagrees: the rule
		// is due again, and the symbol's orders wait for the listing.
		{name: "never agrees within the bound", cooldown: "1s", lags: 40,
			want: []string{`"phase":"result"`, `"phase":"inconsistent"`, "INCONSISTENT EXCHANGE: order", "the fill is the order's outcome",
				"no order on XSOL until a listing agrees", `"phase":"skipped"`},
			not: []string{"settings not applied", `"phase":"error"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := halveRules(t, tc.cooldown)
			ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			before := xsolQuantity(t, ex)
			ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: tc.lags, Times: 1})
			client := overHTTP(t, ex)
			var audit, logs bytes.Buffer
			e, err := engine.New(engine.Config{ListingLag: 200 * time.Millisecond}, set, engine.Deps{Reader: client, Actuator: client,
				Audit: journal.NewAudit(&audit), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			tickEvery2s(t, e, 6)
			orders, after := ordersAt(ex), xsolLeft(ex)
			said := audit.String()
			if orders != 1 || !after.Equal(before.Div(decimal.NewFromInt(2))) {
				t.Fatalf("%d orders reached the exchange, XSOL %s → %s; want one, halved once\naudit:\n%s", orders, before, after, said)
			}
			for _, w := range tc.want {
				if !strings.Contains(said, w) {
					t.Errorf("audit lacks %q:\n%s", w, said)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(said, n) {
					t.Errorf("audit says %q:\n%s", n, said)
				}
			}
			if strings.Contains(logs.String(), "refused") {
				t.Errorf("the log calls a fill a refusal:\n%s", logs.String())
			}
		})
	}
}

// An order whose answer is lost, then a positions listing that lags two
// reads: one fill, settled by the read that shows it, and nothing says
// the guard's own fill was a change "without an order of the guard" or a
// refusal. Before, the settling tick's reconciler audited and notified
// "XSOL LONG reduced 400 → 200 without an order of the guard" and the log
// said "the exchange refused the action" of the fill (issue 37).
func TestLostAnswerThenLaggingListing(t *testing.T) {
	t.Parallel()
	set := halveRules(t, "10m")
	ex, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	before := xsolQuantity(t, ex)
	ex.InjectFault(exchange.DefaultOrderPath, sim.Fault{ListingLags: 2, Times: 1})
	client := overHTTP(t, &loseAnswer{ex: ex, fault: "eof"},
		exchange.WithTimeout(400*time.Millisecond), exchange.WithRetry(exchange.RetryPolicy{MaxAttempts: 1}))
	var audit, logs bytes.Buffer
	e, err := engine.New(engine.Config{ActionTimeout: 2 * time.Second}, set, engine.Deps{Reader: client, Actuator: client,
		Audit: journal.NewAudit(&audit), Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tickEvery2s(t, e, 6)
	orders, after := ordersAt(ex), xsolLeft(ex)
	said := audit.String()
	if orders != 1 || !after.Equal(before.Div(decimal.NewFromInt(2))) {
		t.Fatalf("%d orders reached the exchange, XSOL %s → %s; want one, halved once\naudit:\n%s", orders, before, after, said)
	}
	for _, w := range []string{"outcome unknown", `"phase":"settled"`, "answer lost) filled: quantity 400 → 200"} {
		if !strings.Contains(said, w) {
			t.Errorf("audit lacks %q:\n%s", w, said)
		}
	}
	if strings.Contains(said, "without an order of the guard") {
		t.Errorf("the guard's own fill is audited as another's:\n%s", said)
	}
	if l := logs.String(); strings.Contains(l, "refused") {
		t.Errorf("the log calls a fill a refusal:\n%s", l)
	}
}

// xsolLeft is XSOL's quantity at the exchange, 0 once it is closed.
func xsolLeft(ex *sim.Exchange) decimal.Decimal {
	if p, ok := ex.Position("XSOL"); ok && !p.Empty {
		return p.Quantity
	}
	return decimal.Zero
}
