package margin

// The grid reads each position's entry value, margin and maintenance as
// float64s, the value the decimal figure (EntryValue, Margin,
// Maintenance) rounds to. Worked out in decimals they cost a
// multiplication and a division in math/big per position, most of the
// grid's time on a large account; here they are worked out on the
// coefficients (fixed, u128) where they fit, and converted as
// decimal.Decimal.Float64 converts (both round the exact value to the
// nearest float64, so the two agree), the decimal path kept for the rest.

// exactFloat is v·10^e as the nearest float64, ok false when it cannot
// be had from one correctly rounded operation on exact operands.
func exactFloat(v int64, e int32) (float64, bool) {
	if v < -1<<53 || v > 1<<53 {
		return 0, false
	}
	switch {
	case e <= 0 && -e < int32(len(pow10f)):
		return float64(v) / pow10f[-e], true
	case e > 0 && e < int32(len(pow10f)):
		return float64(v) * pow10f[e], true
	}
	return 0, false
}

// fixedFloat is f as a float64 through exactFloat; ok false when f is
// not known (!known) or exactFloat cannot say.
func fixedFloat(f fixed, known bool) (float64, bool) {
	if !known {
		return 0, false
	}
	return exactFloat(f.v, f.e)
}

// stressFigures are p's entry value, margin and maintenance as float64s:
// toF(p.EntryValue()), toF(p.Margin()), toF(p.Maintenance()); q, qOK are
// toFixed(p.Quantity).
func (p *Position) stressFigures(q fixed, qOK bool) (ev, margin, mm float64) {
	var evF fixed
	evOK := false
	if p.Value.IsZero() {
		e, ok := toFixed(p.Entry)
		if qOK && ok {
			evF, evOK = q.mul(e)
		}
	} else {
		evF, evOK = toFixed(p.Value)
	}
	var ok bool
	if ev, ok = fixedFloat(evF, evOK); !ok {
		ev = toF(p.EntryValue())
	}
	if !p.Held.IsZero() {
		margin = toF(p.Held)
	} else if margin, ok = fixedFloat(marginFixed(evF, evOK, p.Leverage)); !ok {
		margin = toF(p.Margin())
	}
	switch {
	case !p.MM.IsZero():
		mm = toF(p.MM)
	case evOK && !p.RiskLimit.RiskLimitStep.IsPositive():
		// A flat rate: MaintenanceRate is the risk limit's rate.
		r, ok := toFixed(p.RiskLimit.MaintenanceMarginRate)
		var m fixed
		if ok {
			m, ok = r.mul(evF)
		}
		if mm, ok = fixedFloat(m, ok); !ok {
			mm = toF(p.Maintenance())
		}
	default:
		mm = toF(p.Maintenance())
	}
	return ev, margin, mm
}

// marginFixed is Margin(ev, leverage) on the coefficients: ev/leverage
// rounded half away from zero to 8 places (DivRound's rounding), for a
// positive ev; ok false when it does not fit.
func marginFixed(ev fixed, ok bool, leverage int) (fixed, bool) {
	if !ok || ev.v <= 0 {
		return fixed{}, false
	}
	lev := uint64(max(leverage, 1))
	var n u128
	d := lev
	if k := int64(ev.e) + 8; k >= 0 {
		if n, ok = scaled(uint64(ev.v), k); !ok {
			return fixed{}, false
		}
	} else {
		// ev has more than 8 places: divide by leverage·10^(−k).
		if -k >= int64(len(pow10u)) {
			return fixed{}, false
		}
		p := pow10u[-k]
		if lev > ^uint64(0)/p {
			return fixed{}, false
		}
		n, d = u128{lo: uint64(ev.v)}, lev*p
	}
	q, ok := divRound(n, d)
	if !ok || q.hi != 0 || q.lo > 1<<62 {
		return fixed{}, false
	}
	return fixed{int64(q.lo), -8}, true
}
