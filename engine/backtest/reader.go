package backtest

import (
	"context"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"github.com/shopspring/decimal"
)

// laneReader is a lane's read of its simulated exchange: the in-process
// client, with the positions and the index prices copied into buffers the
// lane owns instead of fresh ones at every read. It keeps two of each and
// alternates, so a read leaves the answer of the read before it as it was:
// a snapshot is overwritten two reads after it was taken. That is safe
// because a lane's engine is in process (its calls run inside the tick)
// and nothing outside the replay reads its status; every use of a read
// ends before the tick after next. Positions made fresh at every read were
// two fifths of the bytes a replay step allocated. The symbols, which a
// simulated exchange fixes when it is made, are copied once and that copy
// answers every read of them.
//
// With poison set (tests only), every read is fresh and the buffer it
// would have overwritten is filled with figures no exchange sends instead:
// a replay that kept a read beyond its time then differs from one without
// the buffers (TestLaneBuffersAreNotKept).
type laneReader struct {
	sim.Local
	ex     *sim.Exchange
	poison bool

	pos  [2][]exchange.Position
	idx  [2]map[string]decimal.Decimal
	nPos int
	nIdx int

	trades *exchange.Trades // the symbols, copied at the first read
}

func newLaneReader(ex *sim.Exchange, poison bool) *laneReader {
	return &laneReader{Local: ex.Local(), ex: ex, poison: poison}
}

// Positions reads every position into the older of the two buffers.
func (r *laneReader) Positions(context.Context) ([]exchange.Position, error) {
	slot := &r.pos[r.nPos%2]
	r.nPos++
	if r.poison {
		poisonPositions(*slot)
		*slot = r.ex.AppendPositions(nil)
		return *slot, nil
	}
	*slot = r.ex.AppendPositions(*slot)
	return *slot, nil
}

// Trades returns the symbols, copied at the first read.
func (r *laneReader) Trades(ctx context.Context) (*exchange.Trades, error) {
	if r.poison || r.trades == nil {
		t, err := r.Local.Trades(ctx)
		if err != nil || r.poison {
			return t, err
		}
		r.trades = t
	}
	return r.trades, nil
}

// IndexPrices reads the index prices into the older of the two maps.
func (r *laneReader) IndexPrices(context.Context) (map[string]decimal.Decimal, error) {
	slot := &r.idx[r.nIdx%2]
	r.nIdx++
	if r.poison {
		for name := range *slot {
			(*slot)[name] = decimal.New(-987654321, -3)
		}
		*slot = r.ex.IndexPrices()
		return *slot, nil
	}
	if *slot == nil {
		*slot = map[string]decimal.Decimal{}
	}
	r.ex.IndexPricesInto(*slot)
	return *slot, nil
}

// poisonPositions overwrites positions a read has let go of with figures
// no test scenario has, which would change any outcome computed from them.
func poisonPositions(ps []exchange.Position) {
	bad := decimal.New(-987654321, -3)
	for i := range ps {
		ps[i] = exchange.Position{ID: "poisoned", SymbolID: -1, Direction: "poisoned", Leverage: -1, RiskLevel: -1, Version: -1,
			EntryValue: bad, EntryPrice: bad, Margin: bad, LiquidationPrice: bad, Quantity: bad, RealizedPNL: bad,
			MinimumMaintenanceMarginRate: bad, MinQuantity: bad, MaxQuantity: bad,
			RiskLimit: exchange.RiskLimit{MaxLeverage: -1, InitialMarginRate: bad, MaintenanceMarginRate: bad, MaxQuantity: bad}}
	}
}
