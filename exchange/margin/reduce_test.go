package margin

import (
	"errors"
	"testing"
)

func TestAccountReduce(t *testing.T) {
	t.Parallel()
	at := func(p Position, index string) Position {
		p.Index = dec(index)
		return p
	}
	type move struct{ symbol, before, after string }
	tests := []struct {
		name                          string
		acct                          Account
		i                             int
		qty, price                    string
		pnl, released, free, qtyAfter string
		poolBefore, poolAfter         string
		moves                         []move
	}{
		// isolated long 0.5 @ 64,000 ×20 at 62,000, half: −2,000·0.25 realised, half of
		// 1,600 released; the rest (0.25, margin 800, maintenance 80) keeps
		// 64,000 − (800 − 80)/0.25 = 61,120
		{"isolated long, half", Account{Free: dec("3000"), Positions: []Position{at(xbtc(false), "62000")}}, 0, "0.25", "62000",
			"-500", "800", "3300", "0.25", "0", "0", []move{{"XBTC", "61120", "61120"}}},
		// one cross long: pool 3,000 + 1,600 − 1,000 = 3,600 before and after (the loss
		// is realised, not added); liquidation 64,000 − (3,300 + 800 − 80)/0.25 = 47,920
		{"one cross long, half", Account{Free: dec("3000"), Positions: []Position{at(xbtc(true), "62000")}}, 0, "0.25", "62000",
			"-500", "800", "3300", "0.25", "3600", "3600", []move{{"XBTC", "55120", "47920"}}},
		// two cross: XBTC halved at its entry; XETH's pool 3,800 + 800 + 3,000 less
		// 80 + 150: 3,000 + 7,370/10 = 3,737; XBTC 64,000 − (6,600 − 230)/0.25 = 38,520
		{"two cross, the other moves", Account{Free: dec("3000"), Positions: []Position{xbtc(true), xeth(true, "3100")}}, 0, "0.25", "64000",
			"0", "800", "3800", "0.25", "6600", "6600", []move{{"XBTC", "51420", "38520"}, {"XETH", "3729", "3737"}}},
		// isolated short 10 @ 3,000 at 3,100, half: −(100·5) realised, 1,500 released
		{"isolated short, half", Account{Free: dec("3000"), Positions: []Position{xeth(false, "3100")}}, 0, "5", "3100",
			"-500", "1500", "4000", "5", "0", "0", []move{{"XETH", "3285", "3285"}}},
		// closing the whole position releases all its margin; no liquidation price, no cross pool is left
		{"close", Account{Free: dec("3000"), Positions: []Position{at(xbtc(true), "66000")}}, 0, "0.5", "66000",
			"1000", "1600", "5600", "0", "5600", "0", []move{{"XBTC", "55120", "0"}}},
		// an isolated neighbour is neither reduced nor listed
		{"isolated neighbour", Account{Free: dec("3000"), Positions: []Position{at(xbtc(true), "62000"), xeth(false, "3100")}}, 0, "0.25", "62000",
			"-500", "800", "3300", "0.25", "3600", "3600", []move{{"XBTC", "55120", "47920"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			next, r, err := tt.acct.Reduce(tt.i, dec(tt.qty), dec(tt.price))
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name      string
				got, want string
			}{
				{"realised PNL", r.RealisedPNL.String(), tt.pnl},
				{"margin released", r.MarginReleased.String(), tt.released},
				{"free after", r.FreeAfter.String(), tt.free},
				{"account free", next.Free.String(), tt.free},
				{"quantity after", r.QuantityAfter.String(), tt.qtyAfter},
				{"pool before", r.PoolBefore.String(), tt.poolBefore},
				{"pool after", r.PoolAfter.String(), tt.poolAfter},
			} {
				if c.got != c.want {
					t.Errorf("%s = %s, want %s", c.name, c.got, c.want)
				}
			}
			if len(r.Liquidations) != len(tt.moves) {
				t.Fatalf("liquidations = %+v, want %v", r.Liquidations, tt.moves)
			}
			for k, m := range tt.moves {
				got := r.Liquidations[k]
				if got.Symbol != m.symbol || got.Before.String() != m.before || got.After.String() != m.after || got.Reduced != (k == 0) {
					t.Errorf("liquidation %d = %s %s → %s (reduced %t), want %s %s → %s", k, got.Symbol, got.Before, got.After, got.Reduced, m.symbol, m.before, m.after)
				}
			}
			// The account after agrees with the reduction: what it computes
			// afresh is what the reduction says.
			if q := next.Positions[tt.i].Quantity; !q.Equal(r.QuantityAfter) {
				t.Errorf("account quantity after = %s, want %s", q, r.QuantityAfter)
			}
			if got := next.LiquidationPrice(tt.i); !got.Equal(r.Liquidations[0].After) {
				t.Errorf("account liquidation after = %s, reduction says %s", got, r.Liquidations[0].After)
			}
			if tt.acct.Free.String() != "3000" {
				t.Errorf("the account before was changed: free %s", tt.acct.Free)
			}
		})
	}
}

func TestAccountReduceRefuses(t *testing.T) {
	t.Parallel()
	acct := Account{Free: dec("3000"), Positions: []Position{xbtc(true)}}
	closed := xbtc(true)
	closed.Quantity = dec("0")
	tests := []struct {
		name       string
		acct       Account
		qty, price string
		grows      bool
	}{
		{"more than the position", acct, "0.6", "64000", true},
		{"zero", acct, "0", "64000", true},
		{"negative", acct, "-0.1", "64000", true},
		{"nothing held", Account{Positions: []Position{closed}}, "0.1", "64000", true},
		{"no price", acct, "0.1", "0", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tt.acct.Reduce(0, dec(tt.qty), dec(tt.price))
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, ErrReduceGrows) != tt.grows {
				t.Errorf("err = %v, ErrReduceGrows %t, want %t", err, errors.Is(err, ErrReduceGrows), tt.grows)
			}
		})
	}
}
