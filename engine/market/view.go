package market

import (
	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

// Row is one position of a snapshot joined, once per tick, with what every
// part of the tick reads of it — the rules, the account's figures, the
// account rules' targets, the margin model and the status page — so that
// none of them looks the symbol or the index price up again.
type Row struct {
	P   *exchange.Position
	Key Key
	// Sym is nil when the symbol list in force lacks the position's
	// symbol id.
	Sym *exchange.ContractSymbol
	// IndexName is the index that prices Sym; Index its price in the
	// snapshot and HasIndex whether the snapshot lists it (it may still be
	// ≤ 0); IndexF is Index as a float64, 0 when not listed.
	IndexName string
	Index     decimal.Decimal
	HasIndex  bool
	IndexF    float64
}

// View is a snapshot joined once: its rows, in the snapshot's order.
type View struct {
	Snap *Snapshot
	Rows []Row
}

// Join makes v the view of snap, reusing v's rows: symbols from r (the
// list in force), index names from names (by contract symbol; the symbol's
// baseName otherwise).
func (v *View) Join(snap *Snapshot, r *SnapshotReader, names map[string]string) {
	n := len(snap.Positions)
	if cap(v.Rows) < n {
		v.Rows = make([]Row, n)
	}
	v.Rows, v.Snap = v.Rows[:n], snap
	for i := range snap.Positions {
		p := &snap.Positions[i]
		row := &v.Rows[i]
		*row = Row{P: p, Key: KeyOf(p)}
		if p.Empty {
			continue
		}
		sym, ok := r.Symbol(p.SymbolID)
		if !ok {
			continue
		}
		row.Sym = sym
		row.IndexName = IndexName(names, sym)
		if snap.IndexPrices != nil {
			row.Index, row.HasIndex = snap.IndexPrices[row.IndexName]
			if row.HasIndex {
				row.IndexF = ToFloat(row.Index)
			}
		}
	}
}

// IndexName is the index that prices a contract symbol: names' entry for
// it, else its baseName.
func IndexName(names map[string]string, sym *exchange.ContractSymbol) string {
	if n, ok := names[sym.Name]; ok {
		return n
	}
	return sym.BaseName
}
