package reconcile

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// row is an open position of symbol XSOL (id 1_103) for a view.
func reconRow(dir, qty, liq, index string) market.Row {
	p := &exchange.Position{ID: "1_103", SymbolID: 103, Direction: dir, Quantity: decimal.RequireFromString(qty),
		LiquidationPrice: decimal.RequireFromString(liq), Margin: decimal.NewFromInt(4000), Leverage: 15, Cross: false}
	return market.Row{P: p, Key: market.KeyOf(p), Open: true, Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 103, Name: "XSOL"}},
		IndexName: "SOL", Index: decimal.RequireFromString(index), HasIndex: true}
}

func emptyRow(index string) market.Row {
	p := &exchange.Position{ID: "1_103", SymbolID: 103, Direction: exchange.Long, Empty: true}
	return market.Row{P: p, Key: market.KeyOf(p), Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: 103, Name: "XSOL"}},
		Index: decimal.RequireFromString(index), HasIndex: true}
}

func TestReconcilerNamesWhatTheGuardDidNotDo(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// view is a read listing rows, SOL's index price the first row's.
	view := func(rows ...market.Row) *market.View {
		return &market.View{Rows: rows, Snap: &market.Snapshot{IndexPrices: map[string]decimal.Decimal{"SOL": rows[0].Index}}}
	}
	long := market.Key{ID: "1_103", Dir: exchange.Long}
	cases := []struct {
		name  string
		steps func(r *Reconciler) []journal.Event
		want  []string // audit types and a text each must contain, in order: "type: text"
	}{
		{"liquidated: gone with the index past its liquidation price", func(r *Reconciler) []journal.Event {
			evs := r.Observe(at(0), view(reconRow(exchange.Long, "400", "144.907", "145.2")))
			evs = append(evs, r.Observe(at(2), view(emptyRow("144.5")))...)
			_, g := r.Gone(at(2), long, "listed empty")
			return append(evs, g...)
		}, []string{"liquidated: LIQUIDATED: XSOL LONG 400 at 15x (listed empty; its liquidation price 144.907, index 144.5)"}},
		{"liquidated: missing past the grace, last seen within 1% of it", func(r *Reconciler) []journal.Event {
			evs := r.Observe(at(0), view(reconRow(exchange.Long, "400", "144.907", "146.0")))
			_, g := r.Gone(at(8), long, "not listed for 8s")
			return append(evs, g...)
		}, []string{"liquidated: LIQUIDATED: XSOL LONG 400"}},
		{"closed far from liquidation", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "400", "100", "150")))
			r.Observe(at(2), view(emptyRow("150")))
			_, g := r.Gone(at(2), long, "listed empty")
			return g
		}, []string{"closed: XSOL LONG 400 closed without an order of the guard (listed empty), index 150, 33.33% from its liquidation price 100"}},
		{"grew by hand", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "10", "100", "150")))
			return r.Observe(at(2), view(reconRow(exchange.Long, "30", "120", "150")))
		}, []string{"position: XSOL LONG grew 10 → 30 without an order of the guard"}},
		{"reduced by the guard's own order: nothing said", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "400", "100", "150")))
			r.Acted(at(0), []journal.ActionEvent{{Symbol: "XSOL", Outcome: "sent", Quantity: decimal.NewFromInt(200)}})
			return r.Observe(at(2), view(reconRow(exchange.Long, "200", "90", "150")))
		}, nil},
		{"closed by the guard's own order near its liquidation price: not a liquidation", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "0.1", "131.572", "132.63")))
			r.Acted(at(0), []journal.ActionEvent{{Symbol: "XSOL", Outcome: "sent", Quantity: decimal.RequireFromString("0.1")}})
			r.Observe(at(2), view(emptyRow("132.63")))
			why, g := r.Gone(at(2), long, "listed empty")
			if why != "position closed by the guard's order" {
				t.Errorf("closed by its own order: %q", why)
			}
			return g
		}, nil},
		{"closed by the guard's own order, the next read 20 s later: still not a liquidation", func(r *Reconciler) []journal.Event {
			// ownFor is 9 s at a 2 s interval; a slow exchange's next read
			// comes later, and it is still the read after the order.
			r.Observe(at(0), view(reconRow(exchange.Long, "0.1", "131.572", "132.63")))
			r.Acted(at(0), []journal.ActionEvent{{Symbol: "XSOL", Outcome: "sent", Quantity: decimal.RequireFromString("0.1")}})
			r.Observe(at(20), view(emptyRow("132.63")))
			why, g := r.Gone(at(20), long, "listed empty")
			if why != "position closed by the guard's order" {
				t.Errorf("closed by its own order, read 20 s later: %q", why)
			}
			return g
		}, nil},
		{"liquidated right after a partial order of the guard", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "400", "144.907", "145.2")))
			r.Acted(at(0), []journal.ActionEvent{{Symbol: "XSOL", Outcome: "sent", Quantity: decimal.NewFromInt(100)}})
			r.Observe(at(2), view(emptyRow("144.5")))
			_, g := r.Gone(at(2), long, "listed empty")
			return g
		}, []string{"liquidated: LIQUIDATED: XSOL LONG 400"}},
		{"turned to the other side", func(r *Reconciler) []journal.Event {
			r.Observe(at(0), view(reconRow(exchange.Long, "40", "100", "150")))
			evs := r.Observe(at(2), view(reconRow(exchange.Short, "60", "200", "150")))
			why, g := r.Gone(at(6), long, "not listed for 4s")
			if why != "position turned to the other side" || len(g) != 0 {
				t.Errorf("the turned side gone: %q %v", why, g)
			}
			return evs
		}, []string{"position: XSOL turned from LONG 40 to SHORT 60 without an order of the guard"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New(Settings{LiquidationMargin: 0.01, Interval: 2 * time.Second}, nil)
			evs := c.steps(r)
			if len(evs) != len(c.want) {
				t.Fatalf("%d events, want %d: %+v", len(evs), len(c.want), evs)
			}
			for i, w := range c.want {
				typ, text, _ := strings.Cut(w, ": ")
				ev := evs[i]
				if ev.Audit == nil || ev.Audit.Type != typ || !strings.Contains(ev.Audit.Reason, text) || ev.Note == nil || ev.Count == nil {
					t.Errorf("event %d = %+v (audit %+v), want %s record with %q, notified and counted", i, ev, ev.Audit, typ, text)
				}
				if typ == "liquidated" && ev.Note.Severity != "critical" {
					t.Errorf("a liquidation notified as %s", ev.Note.Severity)
				}
			}
		})
	}
}

// A position left out of the listing with its index at, past or near its
// liquidation price is said probably liquidated at the first read, and
// liquidated (marked, with the figures of its last read) once
// ConfirmReads reads in a row leave it out; a read that lists it again
// withdraws what was said; one left out far from its liquidation price is
// the evaluator's grace's to decide, and said nothing of.
func TestReconcilerLeftOut(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// read is a read listing rows, SOL's index price at index.
	read := func(index string, rows ...market.Row) *market.View {
		return &market.View{Rows: rows, Snap: &market.Snapshot{IndexPrices: map[string]decimal.Decimal{"SOL": decimal.RequireFromString(index)}}}
	}
	open := reconRow(exchange.Long, "400", "144.907", "145.2")
	cases := []struct {
		name   string
		reads  []*market.View
		want   []string // "type/phase", in order
		marked bool
	}{
		{"left out twice past its liquidation price: liquidated", []*market.View{read("145.2", open), read("144.5"), read("144.4")},
			[]string{"liquidated/probable", "liquidated/"}, true},
		{"left out once, then listed again: withdrawn", []*market.View{read("145.2", open), read("144.5"), read("145.0", open)},
			[]string{"liquidated/probable", "liquidated/withdrawn"}, false},
		{"left out far from its liquidation price: nothing said", []*market.View{read("160", reconRow(exchange.Long, "400", "144.907", "160")), read("160"), read("160")},
			nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var marks []Liquidation
			r := New(Settings{LiquidationMargin: 0.01, ConfirmReads: 2, Interval: 2 * time.Second}, func(l Liquidation) { marks = append(marks, l) })
			var got []string
			for i, v := range c.reads {
				for _, ev := range r.Observe(at(2*i), v) {
					got = append(got, ev.Audit.Type+"/"+ev.Audit.Phase)
				}
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") {
				t.Errorf("said %q, want %q", got, c.want)
			}
			if !c.marked {
				if len(marks) != 0 {
					t.Errorf("marked %+v, want none", marks)
				}
				return
			}
			if len(marks) != 1 {
				t.Fatalf("marked %d liquidations, want 1", len(marks))
			}
			m := marks[0]
			if m.Symbol != "XSOL" || m.Side != exchange.Long || !m.Quantity.Equal(decimal.NewFromInt(400)) ||
				!m.LiquidationPrice.Equal(decimal.RequireFromString("144.907")) || !m.Index.Equal(decimal.RequireFromString("144.4")) || m.Text == "" {
				t.Errorf("marked %+v", m)
			}
		})
	}
}

// The reconciler skips leftOut's walk of the positions last listed open
// only when every one of them is listed open in the read (seen counts
// them): over seeded reads where positions come, go, empty, turn, repeat
// at one place and are forgotten (Gone), and reads at the same time
// twice, whenever seen is all of them each one was seen at that read, so
// the walk would have left out none.
func TestReconcilerSeenCountsEveryPositionListed(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(5, 9))
	r := New(Settings{LiquidationMargin: 0.01, ConfirmReads: 2, Interval: 2 * time.Second}, nil)
	row := func(id int, dir string, qty int64, empty bool) market.Row {
		p := &exchange.Position{ID: fmt.Sprintf("1_%d", id), SymbolID: int64(id), Direction: dir, Quantity: decimal.NewFromInt(qty),
			LiquidationPrice: decimal.NewFromInt(90), Margin: decimal.NewFromInt(40), Leverage: 10, Empty: empty}
		return market.Row{P: p, Key: market.KeyOf(p), Open: !empty && qty > 0, Sym: &exchange.ContractSymbol{SpotSymbol: exchange.SpotSymbol{ID: int64(id), Name: fmt.Sprintf("X%d", id)}},
			IndexName: fmt.Sprintf("C%d", id), Index: decimal.NewFromInt(100), HasIndex: true}
	}
	skipped, walked := 0, 0
	now := t0
	for step := range 600 {
		if rng.IntN(8) != 0 { // else the same time again
			now = now.Add(2 * time.Second)
		}
		var rows []market.Row
		for id := range 6 {
			switch k := rng.IntN(20); {
			case k < 18:
				dir := exchange.Long
				if rng.IntN(12) == 0 {
					dir = exchange.Short // turned
				}
				rows = append(rows, row(id, dir, int64(1+rng.IntN(3)), false))
				if rng.IntN(20) == 0 {
					rows = append(rows, rows[len(rows)-1]) // listed twice
				}
			case k < 19:
				rows = append(rows, row(id, exchange.Long, 0, true)) // empty
			default: // missing from the read
			}
		}
		rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
		v := &market.View{Rows: rows, Snap: &market.Snapshot{IndexPrices: map[string]decimal.Decimal{}}}
		r.Observe(now, v)
		if r.seen == len(r.last) {
			skipped++
			for k, s := range r.last {
				if !s.at.Equal(now) {
					t.Fatalf("step %d: seen %d of %d, yet %v was last seen at %s, not now (%s)", step, r.seen, len(r.last), k, s.at, now)
				}
			}
		} else {
			walked++
		}
		// In the keys' order, not the map's, so that the seeded draws,
		// and so the counts below, are the same at every run.
		keys := slices.SortedFunc(maps.Keys(r.last), func(a, b market.Key) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			if !r.last[k].at.Equal(now) && rng.IntN(2) == 0 {
				r.Gone(now, k, "not listed") // forgotten
			}
		}
	}
	t.Logf("skipped %d, walked %d", skipped, walked)
	if skipped < 50 || walked < 50 {
		t.Errorf("leftOut's walk skipped %d times, made %d: the two are hardly both tested", skipped, walked)
	}
}
