package margin

import (
	"testing"

	"github.com/riskguard/riskguard/exchange"
	"github.com/shopspring/decimal"
)

func TestMargin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ev       string
		leverage int
		want     string
	}{
		{"120000", 10, "12000"},
		{"60800", 15, "4053.33333333"},
		{"60800", 3, "20266.66666667"}, // half up at the 8th place
		{"100", 0, "100"},              // below 1 counts as 1
	}
	for _, tc := range tests {
		wantDec(t, "Margin("+tc.ev+")", Margin(dec(tc.ev), tc.leverage), tc.want)
	}
}

func TestLiquidationPrice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                                string
		direction, q, entry, collateral, mm string
		scale                               int32
		want                                string
	}{
		// Isolated: long P(1 − 1/L + mmr), short P(1 + 1/L − mmr).
		{"long 10x", exchange.Long, "2", "60000", "12000", "0.005", 1, "54300"},
		{"long 5x: further away", exchange.Long, "2", "60000", "24000", "0.005", 1, "48300"},
		{"short 10x", exchange.Short, "2", "60000", "12000", "0.005", 1, "65700"},
		{"short 20x", exchange.Short, "12", "3050", "1830", "0.01", 2, "3172"},
		// Cross: the free balance (10000) adds to the margin.
		{"long cross", exchange.Long, "2", "60000", "22000", "0.005", 1, "49300"},
		{"short cross", exchange.Short, "2", "60000", "22000", "0.005", 1, "70700"},
		// Rounding towards the entry price: up for a long, down for a short.
		{"long rounds up", exchange.Long, "400", "152", "4053.33333333", "0.02", 3, "144.907"},
		{"short rounds down", exchange.Short, "3", "100", "10", "0.01", 2, "102.33"},
		// Collateral beyond the whole position value: no positive price liquidates a long.
		{"long unreachable", exchange.Long, "1", "100", "500", "0.01", 2, "0"},
		{"no quantity", exchange.Long, "0", "100", "10", "0.01", 2, "0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := LiquidationPrice(tc.direction, dec(tc.q), dec(tc.entry), dec(tc.collateral), dec(tc.mm), tc.scale)
			wantDec(t, "liquidation price", got, tc.want)
		})
	}
}

func TestMaintenanceRate(t *testing.T) {
	t.Parallel()
	rl := exchange.RiskLimit{
		MaintenanceMarginRate: dec("0.005"),
		MarginRateStep:        dec("0.005"),
		RiskLimitBase:         dec("2000000"),
		RiskLimitStep:         dec("1000000"),
		MaxRiskLimitSteps:     5,
	}
	tests := []struct{ ev, want string }{
		{"51360", "0.005"},
		{"2000000", "0.005"},
		{"2000000.01", "0.01"}, // one step started
		{"3000000", "0.01"},
		{"3500000", "0.015"},
		{"90000000", "0.03"}, // capped at 5 steps
	}
	for _, tc := range tests {
		wantDec(t, "MaintenanceRate("+tc.ev+")", MaintenanceRate(rl, dec(tc.ev)), tc.want)
	}
	flat := rl
	flat.RiskLimitStep = dec("0")
	wantDec(t, "flat", MaintenanceRate(flat, dec("90000000")), "0.005")
}

func TestRiskLevel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                                       string
		direction, q, entry, collateral, mm, index string
		want                                       int
	}{
		// 600 maintenance over 12000 equity: 5%.
		{"at entry", exchange.Long, "2", "60000", "12000", "0.005", "60000", 5},
		// Equity 12000 − 2·2850 = 6300: 600/6300 = 9.52% → 10.
		{"halfway down", exchange.Long, "2", "60000", "12000", "0.005", "57150", 10},
		{"at liquidation", exchange.Long, "2", "60000", "12000", "0.005", "54300", 100},
		{"past liquidation", exchange.Long, "2", "60000", "12000", "0.005", "50000", 100},
		{"in profit", exchange.Long, "2", "60000", "12000", "0.005", "70000", 2},
		{"short against", exchange.Short, "2", "60000", "12000", "0.005", "65700", 100},
		{"empty", exchange.Short, "0", "0", "0", "0.005", "65700", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RiskLevel(tc.direction, dec(tc.q), dec(tc.entry), dec(tc.collateral), dec(tc.mm), dec(tc.index))
			if got != tc.want {
				t.Errorf("RiskLevel = %d, want %d", got, tc.want)
			}
		})
	}
}

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// wantDec compares decimals by value.
func wantDec(t *testing.T, what string, got decimal.Decimal, want string) {
	t.Helper()
	if !got.Equal(dec(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}
