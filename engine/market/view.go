package market

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"strconv"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/margin"
	"github.com/riskguard/riskguard/rules"
	"github.com/shopspring/decimal"
)

// Row is one position of a snapshot joined, once per tick, with what every
// part of the tick reads of it — the rules, the account's figures, the
// account rules' targets, the margin model and the status page — so that
// none of them looks the symbol or the index price up again.
type Row struct {
	P   *exchange.Position
	Key Key
	// Open: the position holds something (it is not empty and its
	// quantity is positive). The one test of an open position: the
	// account's figures, the margin model and its fit read it.
	Open bool
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
	// SymEnv is Sym as the rules see it, converted once per symbols read.
	SymEnv *rules.Symbol
	// N is the position's numbers as float64, converted once per value
	// (nil when Sym is): valid until the next Join.
	N *Nums
}

// View is a snapshot joined once: its rows, in the snapshot's order.
type View struct {
	Snap *Snapshot
	Rows []Row
	// syms is the symbol list in force joined with the index names, of
	// the symbols read symsOf: built once per read.
	syms   map[int64]*symInfo
	symsOf *exchange.Trades
	// memo is the last conversion of each place's numbers, and its
	// symbol.
	memo []numsMemo
	// gen counts the builds of syms.
	gen uint64
	// model and rep are the open rows' positions with a symbol as the
	// margin model sees them, and what the exchange lists of each, and
	// modelRows the row of each, built at the first ask after a join
	// (modelBuilt; Model).
	model      []margin.Position
	rep        []margin.Reported
	modelRows  []int
	modelBuilt bool
	// sig is the cross positions' signature, computed at the first ask
	// after a join (sigBuilt; CrossSig), in sigBuf.
	sig      uint64
	sigBuilt bool
	sigBuf   []byte
	// joins counts the joins; moved is the last join that changed a row's
	// figures (Steady), and modelAt the join model was built at (0: not
	// built since its rows last changed).
	joins, moved, modelAt uint64
}

// symInfo is a contract symbol of the list in force as the rows use it.
type symInfo struct {
	c         *exchange.ContractSymbol
	indexName string
	env       rules.Symbol
}

// Forget drops what the view keeps between ticks: the index names changed
// (a reload).
func (v *View) Forget() { v.syms, v.symsOf = nil, nil }

// Join makes v the view of snap, reusing v's rows: symbols from r (the
// list in force), index names from names (by contract symbol; the symbol's
// baseName otherwise).
func (v *View) Join(snap *Snapshot, r *SnapshotReader, names map[string]string) {
	n := len(snap.Positions)
	v.joins++
	if n != len(v.Rows) {
		v.moved = v.joins
	}
	if cap(v.Rows) < n {
		v.Rows = make([]Row, n)
	}
	v.Rows, v.Snap = v.Rows[:n], snap
	v.modelBuilt, v.sigBuilt = false, false
	if len(v.memo) < n {
		v.memo = append(v.memo, make([]numsMemo, n-len(v.memo))...)
	} else if len(v.memo) > n {
		clear(v.memo[n:]) // let go of the decimals of places gone
		v.memo = v.memo[:n]
	}
	if tr := r.trades; tr != v.symsOf || v.syms == nil {
		v.syms = make(map[int64]*symInfo, len(r.byID))
		for id, c := range r.byID {
			v.syms[id] = &symInfo{c: c, indexName: IndexName(names, c), env: RulesSymbol(c)}
		}
		v.symsOf = tr
		v.gen++
	}
	for i := range snap.Positions {
		p := &snap.Positions[i]
		m := &v.memo[i]
		var info *symInfo
		if !p.Empty {
			// The symbol of the place's last position, while the
			// symbols are the same: no lookup.
			if m.symGen != v.gen || m.symID != p.SymbolID {
				m.sym, m.symID, m.symGen = v.syms[p.SymbolID], p.SymbolID, v.gen
			}
			info = m.sym
		}
		if v.Rows[i].set(p, info, m, snap.IndexPrices) {
			v.moved = v.joins
		}
	}
}

// Joins counts the view's joins: the number of the last one.
func (v *View) Joins() uint64 { return v.joins }

// Steady reports whether no row's figures changed after join number
// since (Joins): the same places, each with the same symbol and the same
// position but for its risk level, every decimal the same copy (a reader
// that hands unchanged figures over as the same decimals, as the
// simulated exchange does; a decoded answer's are fresh, so it is never
// steady). Only the index prices may have moved: what was worked out
// from the rows' own figures at join since holds.
func (v *View) Steady(since uint64) bool { return since != 0 && v.moved <= since }

// set makes r the row of p, whose symbol is info (nil: none, or the
// position is empty), converting its numbers with m, and reports whether
// the row's figures changed (Steady): its symbol, or its position but for
// the risk level. A row's pointers are written only when they change (the
// symbol's rarely do), as a write while the collector marks costs a
// barrier.
func (r *Row) set(p *exchange.Position, info *symInfo, m *numsMemo, prices map[string]decimal.Decimal) (moved bool) {
	r.P = p
	r.Open = !p.Empty && p.Quantity.IsPositive()
	if k := KeyOf(p); r.Key != k {
		r.Key = k
	}
	if info == nil {
		moved = m.held || r.Sym != nil
		m.held = false
		if r.Sym != nil || r.SymEnv != nil || r.N != nil || r.IndexName != "" || r.Index != (decimal.Decimal{}) {
			r.Sym, r.IndexName, r.SymEnv, r.N, r.Index = nil, "", nil, nil, decimal.Decimal{}
		}
		r.HasIndex, r.IndexF = false, 0
		return moved
	}
	if r.SymEnv != &info.env {
		r.Sym, r.IndexName, r.SymEnv = info.c, info.indexName, &info.env
		moved = true
	}
	if !m.held || !samePosition(&m.pos, p) {
		// Converted where a decimal is not the same copy; kept, so that
		// the next join of the same figures converts nothing.
		m.pos, m.held, moved = *p, true, true
		m.of(p)
	}
	if n := &m.n; r.N != n {
		r.N = n
	}
	var index decimal.Decimal
	var has bool
	if prices != nil {
		index, has = prices[info.indexName]
	}
	if r.Index != index {
		r.Index = index
	}
	r.HasIndex, r.IndexF = has, 0
	if has {
		r.IndexF = m.indexOf(index)
	}
	return moved
}

// Model returns the open rows' positions with a symbol as the margin model
// sees them (margin.PositionOf, at the row's index price when the
// snapshot lists one; the maintenance margin left to the caller), and the
// margin and liquidation price the exchange lists for each, in the rows'
// order: built once per join, at the first ask. Both lists are the
// view's, valid until the next Join; a caller that keeps them copies them.
func (v *View) Model() ([]margin.Position, []margin.Reported) {
	if v.modelBuilt {
		return v.model, v.rep
	}
	if v.Steady(v.modelAt) {
		// The same rows as when it was built: only the index prices are
		// taken again.
		for k, i := range v.modelRows {
			v.model[k].Index = decimal.Decimal{}
			if r := &v.Rows[i]; r.HasIndex {
				v.model[k].Index = r.Index
			}
		}
		v.modelBuilt = true
		return v.model, v.rep
	}
	ps, rep, rows := v.model[:0], v.rep[:0], v.modelRows[:0]
	for i := range v.Rows {
		r := &v.Rows[i]
		if !r.Open || r.Sym == nil {
			continue
		}
		p := r.P
		mp := margin.PositionOf(p, r.Sym.Name, int32(r.Sym.QuoteScale))
		if r.HasIndex {
			mp.Index = r.Index
		}
		ps = append(ps, mp)
		rep = append(rep, margin.Reported{Margin: p.Margin, Liquidation: p.LiquidationPrice})
		rows = append(rows, i)
	}
	v.model, v.rep, v.modelRows, v.modelBuilt, v.modelAt = ps, rep, rows, true, v.joins
	return ps, rep
}

// ModelRow is the row of Model's i-th position, of the same join.
func (v *View) ModelRow(i int) *Row {
	v.Model()
	return &v.Rows[v.modelRows[i]]
}

// CrossSig identifies the snapshot's open cross positions with their
// leverages and figures (quantity, entry value, margin, liquidation price:
// a change of any may move the cross pool; the spec gives the version no
// meaning, so it is no sign of a change): computed once per join, at the
// first ask.
func (v *View) CrossSig() uint64 {
	if v.sigBuilt {
		return v.sig
	}
	sig := fnv.New64a()
	for i := range v.Rows {
		r := &v.Rows[i]
		if !r.Open || !r.P.Cross {
			continue
		}
		p := r.P
		b := append(v.sigBuf[:0], p.ID...)
		b = strconv.AppendInt(append(b, '/'), p.Version, 10)
		b = strconv.AppendInt(append(b, '/'), int64(p.Leverage), 10)
		if n := r.N; n != nil {
			for _, f := range [...]float64{n.Quantity, n.EntryValue, n.Margin, n.LiquidationPrice} {
				b = binary.LittleEndian.AppendUint64(append(b, '/'), math.Float64bits(f))
			}
		} else {
			b = append(append(b, '/'), p.Quantity.String()...)
		}
		v.sigBuf = append(b, ';')
		sig.Write(v.sigBuf)
	}
	v.sig, v.sigBuilt = sig.Sum64(), true
	return v.sig
}

// IndexName is the index that prices a contract symbol: names' entry for
// it, else its baseName.
func IndexName(names map[string]string, sym *exchange.ContractSymbol) string {
	if n, ok := names[sym.Name]; ok {
		return n
	}
	return sym.BaseName
}
