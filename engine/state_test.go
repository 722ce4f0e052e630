package engine

import (
	"math"
	"testing"

	"github.com/riskguard/riskguard/engine/market"
)

func TestToFloat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want float64
	}{
		{"0", 0}, {"1", 1}, {"-2.5", -2.5}, {"0.1", 0.1}, {"96500.5", 96500.5},
		{"0.000123456789012345", 0.000123456789012345}, {"123456789012345", 123456789012345},
		{"1e30", 1e30}, {"-0.0000000000000000000000001", -1e-25},
	}
	for _, tt := range tests {
		got := market.ToFloat(dec(tt.in))
		if got != tt.want && math.Abs(got-tt.want) > math.Abs(tt.want)*1e-15 {
			t.Errorf("market.ToFloat(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
	// 16 to 18 digits: within one part in 10^15.
	d := dec("1234.56789012345678")
	if got := market.ToFloat(d); math.Abs(got-1234.56789012345678) > 1e-12 {
		t.Errorf("market.ToFloat(%s) = %v", d, got)
	}
}
