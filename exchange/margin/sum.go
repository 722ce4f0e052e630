package margin

import "github.com/shopspring/decimal"

// Sum adds decimals and unrealised PNLs as decimal.Decimal's Add, Sub, Mul
// and Neg give them, value and exponent alike, in int64 while every term
// and partial result fits, and in decimals from the first that does not:
// an account's equity summed every step without math/big. The zero Sum is
// zero (decimal.Zero's value and exponent).
type Sum struct {
	f   fixed
	d   decimal.Decimal
	big bool // the sum is in d
}

// NewSum is a sum starting at d.
func NewSum(d decimal.Decimal) Sum {
	if f, ok := toFixed(d); ok {
		return Sum{f: f}
	}
	return Sum{d: d, big: true}
}

// toBig moves the sum into decimals.
func (s *Sum) toBig() {
	if !s.big {
		s.d, s.big = s.f.dec(), true
	}
}

// Add adds d: s.Decimal().Add(d).
func (s *Sum) Add(d decimal.Decimal) {
	if !s.big {
		if f, ok := toFixed(d); ok {
			if r, ok := s.f.add(f); ok {
				s.f = r
				return
			}
		}
		s.toBig()
	}
	s.d = s.d.Add(d)
}

// AddPNL adds a position's unrealised PNL at index: (index − entry) ×
// quantity, negated for a short, computed and added as those decimal
// operations give it.
func (s *Sum) AddPNL(index, entry, quantity decimal.Decimal, short bool) {
	if !s.big {
		if u, ok := pnlFixed(index, entry, quantity, short); ok {
			if r, ok := s.f.add(u); ok {
				s.f = r
				return
			}
		}
		s.toBig()
	}
	u := index.Sub(entry).Mul(quantity)
	if short {
		u = u.Neg()
	}
	s.d = s.d.Add(u)
}

// pnlFixed is AddPNL's term in int64, ok false when it does not fit.
func pnlFixed(index, entry, quantity decimal.Decimal, short bool) (fixed, bool) {
	ix, ok1 := toFixed(index)
	en, ok2 := toFixed(entry)
	q, ok3 := toFixed(quantity)
	if !ok1 || !ok2 || !ok3 {
		return fixed{}, false
	}
	d, ok := ix.sub(en)
	if !ok {
		return fixed{}, false
	}
	u, ok := d.mul(q)
	if ok && short {
		u, ok = u.neg()
	}
	return u, ok
}

// Decimal is the sum.
func (s Sum) Decimal() decimal.Decimal {
	if s.big {
		return s.d
	}
	return s.f.dec()
}
