package rules

import (
	"errors"
	"math"
	"testing"
	"time"
)

// validInput is a healthy long XBTC position: index 100, liquidation at 90.
func validInput() Input {
	return Input{
		Position: Position{
			ID: "7_1", UserID: 7, SymbolID: 1, Symbol: "XBTC", Direction: "LONG",
			Leverage: 10, LiquidationPrice: 90, Quantity: 2, Margin: 20, EntryPrice: 100, EntryValue: 200,
		},
		RiskLimit:  RiskLimit{MaxLeverage: 20, MaxQuantity: 100, MaintenanceMarginRate: 0.005},
		Symbol:     Symbol{ID: 1, Name: "XBTC", BaseName: "BTC", QuoteName: "USD", Type: "FUTURES"},
		IndexPrice: 100,
		HasIndex:   true,
		Now:        time.UnixMilli(1763700000000).UTC(),
	}
}

func TestFill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name               string
		edit               func(in *Input)
		distance, side     float64
		notional, levRatio float64
	}{
		{"long", func(in *Input) {}, 0.10, 1, 200, 0.5},
		{"short", func(in *Input) {
			in.Position.Direction = "SHORT"
			in.Position.LiquidationPrice = 104
		}, 0.04, -1, 200, 0.5},
		{"long past liquidation", func(in *Input) { in.IndexPrice = 80 }, -0.125, 1, 160, 0.5},
		{"short past liquidation", func(in *Input) {
			in.Position.Direction = "SHORT"
			in.Position.LiquidationPrice = 95
		}, -0.05, -1, 200, 0.5},
		{"over max leverage", func(in *Input) { in.Position.Leverage = 25 }, 0.10, 1, 200, 1.25},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			tc.edit(&in)
			var e Env
			e.Fill(&in)
			if got := e.NoData(); got != "" {
				t.Fatalf("NoData() = %q, want valid", got)
			}
			near := func(got, want float64) bool { return math.Abs(got-want) < 1e-12 }
			if !near(e.LiquidationDistance, tc.distance) {
				t.Errorf("liquidationDistance = %v, want %v", e.LiquidationDistance, tc.distance)
			}
			if e.Position.Side != tc.side {
				t.Errorf("side = %v, want %v", e.Position.Side, tc.side)
			}
			if !near(e.Notional, tc.notional) {
				t.Errorf("notional = %v, want %v", e.Notional, tc.notional)
			}
			if !near(e.LeverageRatio, tc.levRatio) {
				t.Errorf("leverageRatio = %v, want %v", e.LeverageRatio, tc.levRatio)
			}
			if e.NowMillis != 1763700000000 || !e.Now.Equal(in.Now) {
				t.Errorf("now = %v / %d", e.Now, e.NowMillis)
			}
		})
	}
}

func TestFillNoData(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(in *Input)
		want string
	}{
		{"missing index", func(in *Input) { in.HasIndex = false }, ReasonIndexMissing},
		{"index zero", func(in *Input) { in.IndexPrice = 0 }, ReasonIndexNotPositive},
		{"index negative", func(in *Input) { in.IndexPrice = -5 }, ReasonIndexNotPositive},
		{"index NaN", func(in *Input) { in.IndexPrice = math.NaN() }, ReasonIndexNotFinite},
		{"index +Inf", func(in *Input) { in.IndexPrice = math.Inf(1) }, ReasonIndexNotFinite},
		{"liquidation price 0 on a non-empty position", func(in *Input) { in.Position.LiquidationPrice = 0 }, ReasonLiquidationZero},
		{"liquidation price negative", func(in *Input) { in.Position.LiquidationPrice = -1 }, ReasonLiquidationInvalid},
		{"maxLeverage 0", func(in *Input) { in.RiskLimit.MaxLeverage = 0 }, ReasonMaxLeverageZero},
		{"unknown direction", func(in *Input) { in.Position.Direction = "" }, ReasonUnknownDirection},
		{"quantity NaN", func(in *Input) { in.Position.Quantity = math.NaN() }, ReasonNonFiniteInput},
		{"maxQuantity Inf", func(in *Input) { in.RiskLimit.MaxQuantity = math.Inf(-1) }, ReasonNonFiniteInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := validInput()
			tc.edit(&in)
			var e Env
			e.Fill(&in)
			if got := e.NoData(); got != tc.want {
				t.Errorf("NoData() = %q, want %q", got, tc.want)
			}
			// Whatever the condition, the answer is "no data", not false.
			for _, when := range []string{"liquidationDistance < 0.05", "liquidationDistance >= 0.05", "true"} {
				r := &Rule{Name: "r", When: when}
				if err := r.Compile(); err != nil {
					t.Fatal(err)
				}
				got, err := r.Eval(&e)
				var nd *NoDataError
				if !errors.Is(err, ErrNoData) || !errors.As(err, &nd) || nd.Reason != tc.want || got {
					t.Errorf("Eval(%q) = %v, %v; want false, no data (%s)", when, got, err, tc.want)
				}
			}
		})
	}
}

func TestFillEmptyPositionWithoutLiquidationPrice(t *testing.T) {
	t.Parallel()
	in := validInput()
	in.Position.Empty = true
	in.Position.Quantity = 0
	in.Position.LiquidationPrice = 0
	var e Env
	e.Fill(&in)
	if got := e.NoData(); got != "" {
		t.Errorf("NoData() = %q for an empty position, want valid", got)
	}
}

func TestZeroEnvIsNoData(t *testing.T) {
	t.Parallel()
	var e Env
	if e.NoData() == "" {
		t.Error("a zero Env reads as valid")
	}
}

func TestFillReusedEnvForgetsPreviousState(t *testing.T) {
	t.Parallel()
	var e Env
	bad := validInput()
	bad.HasIndex = false
	e.Fill(&bad)
	good := validInput()
	e.Fill(&good)
	if got := e.NoData(); got != "" {
		t.Errorf("NoData() = %q after refilling with valid input", got)
	}
}

func TestFillDoesNotAllocate(t *testing.T) {
	in := validInput()
	var e Env
	if n := testing.AllocsPerRun(100, func() { e.Fill(&in) }); n != 0 {
		t.Errorf("Fill allocates %v times", n)
	}
}
