package margin

// Line is one open position as the account's figures need it. The figures
// are what rules read, so they are float64, at the expression boundary;
// the margin and maintenance margin come from the model's decimals.
type Line struct {
	Short, Cross bool
	// Quantity and Index (0 when unknown) give the notional q·index;
	// EntryValue q·P the PNL against it.
	Quantity, Index, EntryValue float64
	// Margin is the margin held, Maintenance the maintenance margin
	// (Position.Maintenance).
	Margin, Maintenance float64
}

// Figures are the account's totals at its positions' index prices: what a
// rule sees as `account`.
type Figures struct {
	// Equity is the free balance plus every margin and unrealised PNL.
	Equity float64
	// Margin is every open position's margin.
	Margin float64
	// UnrealizedPNL is every open position's PNL at its index.
	UnrealizedPNL float64
	// GrossNotional is Σ q·index; NetNotional the same, shorts negative.
	GrossNotional, NetNotional float64
	// CrossMaintenance is the cross positions' maintenance margin and
	// CrossCollateral their pool: the free balance, their margins and PNL.
	CrossMaintenance, CrossCollateral float64
	// Cross is the number of open cross positions, Positions of all.
	Cross, Positions int
	// Complete is false when a position has no index price: its PNL and
	// notional are missing from the totals.
	Complete bool
}

// Totals sums the account of free balance free and the open positions.
func Totals(free float64, lines []Line) Figures {
	f := Figures{Complete: true, CrossCollateral: free}
	for i := range lines {
		l := &lines[i]
		f.Positions++
		f.Margin += l.Margin
		var pnl float64
		if l.Index > 0 {
			notional := l.Quantity * l.Index
			pnl = notional - l.EntryValue
			f.GrossNotional += notional
			if l.Short {
				pnl = -pnl
				f.NetNotional -= notional
			} else {
				f.NetNotional += notional
			}
		} else {
			f.Complete = false
		}
		f.UnrealizedPNL += pnl
		if l.Cross {
			f.Cross++
			f.CrossMaintenance += l.Maintenance
			f.CrossCollateral += l.Margin + pnl
		}
	}
	f.Equity = free + f.Margin + f.UnrealizedPNL
	return f
}

// MarginRatio is CrossMaintenance / CrossCollateral: 1 when the cross
// positions are liquidated together, 0 without any. ok is false when the
// pool is not positive (past liquidation).
func (f Figures) MarginRatio() (float64, bool) {
	if f.Cross == 0 {
		return 0, true
	}
	if f.CrossCollateral <= 0 {
		return 0, false
	}
	return f.CrossMaintenance / f.CrossCollateral, true
}

// Leverage is GrossNotional / Equity; ok is false when the equity is not
// positive.
func (f Figures) Leverage() (float64, bool) {
	if f.Equity <= 0 {
		return 0, false
	}
	return f.GrossNotional / f.Equity, true
}
