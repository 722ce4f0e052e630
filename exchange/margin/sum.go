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
	if s.big {
		s.d = s.d.Add(d)
		return
	}
	f, ok := toFixed(d)
	s.addFixed(d, f, ok)
}

// addFixed is Add of d converted already (f, ok: toFixed(d)).
func (s *Sum) addFixed(d decimal.Decimal, f fixed, ok bool) {
	if !s.big {
		if ok {
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
	return pnlOfFixed(ix, en, q, short)
}

// pnlOfFixed is pnlFixed of the figures converted.
func pnlOfFixed(ix, en, q fixed, short bool) (fixed, bool) {
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

// PositionTerms are the figures of a position that a sum of equity reads
// besides its index price (its margin, entry price and quantity),
// converted for Sum once: a caller that keeps them while the decimals
// stay the same copies converts none again (AddPosition).
type PositionTerms struct {
	margin, entry, quantity decimal.Decimal
	mf, ef, qf              fixed
	mok, eok, qok           bool
}

// TermsOf are the terms of a position with margin, entry price and
// quantity.
func TermsOf(margin, entry, quantity decimal.Decimal) PositionTerms {
	t := PositionTerms{margin: margin, entry: entry, quantity: quantity}
	t.mf, t.mok = toFixed(margin)
	t.ef, t.eok = toFixed(entry)
	t.qf, t.qok = toFixed(quantity)
	return t
}

// Same reports whether t are the terms of these decimals, each the same
// copy (coefficient and exponent).
func (t *PositionTerms) Same(margin, entry, quantity decimal.Decimal) bool {
	return t.margin == margin && t.entry == entry && t.quantity == quantity
}

// AddPosition adds a position's margin and then its unrealised PNL at
// index, from its terms t: s.Add(margin) and s.AddPNL(index, entry,
// quantity, short), the same sum, without converting the terms again.
func (s *Sum) AddPosition(t *PositionTerms, index decimal.Decimal, short bool) {
	s.addFixed(t.margin, t.mf, t.mok)
	if !s.big && t.eok && t.qok {
		if ix, ok := toFixed(index); ok {
			if u, ok := pnlOfFixed(ix, t.ef, t.qf, short); ok {
				if r, ok := s.f.add(u); ok {
					s.f = r
					return
				}
			}
		}
	}
	s.AddPNL(index, t.entry, t.quantity, short)
}
