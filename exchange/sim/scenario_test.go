package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange"
	"github.com/riskguard/riskguard/exchange/sim"
	"gopkg.in/yaml.v3"
)

// prices steps a sim with the default scenario every interval for the
// duration and returns its index prices at the end.
func prices(t *testing.T, seed int64, every, total time.Duration) map[string]string {
	t.Helper()
	e, err := sim.New(sim.Config{Key: testKey, Secret: testSecret, Seed: seed, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	for d := every; d <= total; d += every {
		e.Step(t0.Add(d))
	}
	out := map[string]string{}
	for _, n := range []string{"BTC", "ETH", "SOL", "DOGE"} {
		p, _ := e.IndexPrice(n)
		out[n] = p.String()
	}
	return out
}

func TestDeterminism(t *testing.T) {
	t.Parallel()
	a := prices(t, 42, time.Second, 90*time.Second)
	b := prices(t, 42, time.Second, 90*time.Second)
	for n := range a {
		if a[n] != b[n] {
			t.Errorf("%s: %s vs %s with the same seed", n, a[n], b[n])
		}
	}
	// The path lives on a 1 s grid: stepping every 3 s, or once, lands on
	// the same prices.
	for _, every := range []time.Duration{3 * time.Second, 90 * time.Second} {
		c := prices(t, 42, every, 90*time.Second)
		for n := range a {
			if a[n] != c[n] {
				t.Errorf("%s stepping every %s: %s, want %s", n, every, c[n], a[n])
			}
		}
	}
	d := prices(t, 43, time.Second, 90*time.Second)
	if d["BTC"] == a["BTC"] || d["ETH"] == a["ETH"] {
		t.Errorf("seeds 42 and 43 gave the same walk: %v", d)
	}
	if d["SOL"] != a["SOL"] {
		t.Errorf("a scripted path depends on the seed: %s vs %s", d["SOL"], a["SOL"])
	}
}

func TestScriptedPath(t *testing.T) {
	t.Parallel()
	e, err := sim.New(sim.Config{Key: testKey, Secret: testSecret, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	// Default SOL: 150 @0s, 148.5 @20s, 146.5 @45s, 144.5 @70s, 147 @90s, 151 @120s.
	tests := []struct {
		at   time.Duration
		want string
	}{
		{0, "150"},
		{10 * time.Second, "149.25"},
		{20 * time.Second, "148.5"},
		{20*time.Second + 999*time.Millisecond, "148.5"}, // on the grid
		{30 * time.Second, "147.7"},
		{80 * time.Second, "145.75"},
		{10 * time.Minute, "151"}, // holds after the last point
		{5 * time.Second, "151"},  // time going back moves nothing
	}
	for _, tc := range tests {
		e.Step(t0.Add(tc.at))
		got, _ := e.IndexPrice("SOL")
		wantDec(t, "SOL at "+tc.at.String(), got, tc.want)
	}
	// SetIndexPrice takes the index off its path.
	e.SetIndexPrice("SOL", dec("10"))
	e.Step(t0.Add(20 * time.Minute))
	got, _ := e.IndexPrice("SOL")
	wantDec(t, "SOL after SetIndexPrice", got, "10")
	if _, ok := e.IndexPrice("NOPE"); ok {
		t.Error("IndexPrice of an unknown index")
	}
	e.SetIndexPrice("NEW", dec("1.5"))
	if p, ok := e.IndexPrice("NEW"); !ok || !p.Equal(dec("1.5")) {
		t.Errorf("new index = %s %v", p, ok)
	}
}

func TestDefaultScenario(t *testing.T) {
	t.Parallel()
	if err := sim.DefaultScenario().Validate(); err != nil {
		t.Fatal(err)
	}
	v := newEnv(t, sim.Config{Seed: sim.DefaultSeed})
	ps := v.sim.Positions()
	var long, short, cross, isolated, empty, overMax int
	for _, p := range ps {
		switch {
		case p.Empty:
			empty++
			continue
		case p.Direction == exchange.Long:
			long++
		default:
			short++
		}
		if p.Cross {
			cross++
		} else {
			isolated++
		}
		if p.Leverage > p.RiskLimit.MaxLeverage {
			overMax++
		}
	}
	if long == 0 || short == 0 || cross == 0 || isolated == 0 || empty != 1 || overMax != 1 {
		t.Errorf("long %d short %d cross %d isolated %d empty %d over max %d", long, short, cross, isolated, empty, overMax)
	}
	// Over the demo's two minutes, XETH (short, isolated, 20×) comes
	// within 5% and then 3% of its liquidation price with the default seed.
	var within5, within3 time.Duration
	for i := 1; i <= 120; i++ {
		at := time.Duration(i) * time.Second
		v.sim.Step(t0.Add(at))
		p, _ := v.sim.Position("XETH")
		ix, _ := v.sim.IndexPrice("ETH")
		dist := p.LiquidationPrice.Sub(ix).Div(ix).InexactFloat64()
		if within5 == 0 && dist < 0.05 {
			within5 = at
		}
		if within3 == 0 && dist < 0.03 {
			within3 = at
		}
	}
	if within5 == 0 || within5 > 60*time.Second || within3 == 0 {
		t.Errorf("XETH within 5%% at %s, within 3%% at %s", within5, within3)
	}
	t.Logf("XETH within 5%% at %s, within 3%% at %s", within5, within3)
}

func TestLoadScenario(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const good = `
currencies: [USDT, BTC]
balance: 1000
contracts:
  - name: XBTC
    base: BTC
    quote: USDT
    quoteScale: 1
    riskLimit: {maxLeverage: 20, maintenanceMarginRate: 0.005}
positions:
  - {symbol: XBTC, direction: SHORT, quantity: 0.5, entryPrice: 60000, leverage: 10}
openOrders: {XBTC: 2}
indexes:
  - name: BTC
    points: [{at: 0s, price: 60000}, {at: 1m, price: 66000}]
closedOrders: 3
`
	t.Run("yaml", func(t *testing.T) {
		sc, err := sim.LoadScenario(write("good.yaml", good))
		if err != nil {
			t.Fatal(err)
		}
		e, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		p, _ := e.Position("XBTC")
		wantDec(t, "liquidation", p.LiquidationPrice, "65700")
		e.Step(t0.Add(30 * time.Second))
		ix, _ := e.IndexPrice("BTC")
		wantDec(t, "index at 30s", ix, "63000")
		if e.OpenOrders("XBTC") != 2 {
			t.Errorf("open orders = %d", e.OpenOrders("XBTC"))
		}
	})
	t.Run("json", func(t *testing.T) {
		js := `{"currencies":["USDT","ETH"],"contracts":[{"name":"XETH","base":"ETH","quote":"USDT",
			"riskLimit":{"maxLeverage":25,"maintenanceMarginRate":"0.01"}}],
			"indexes":[{"name":"ETH","walk":{"start":3000,"volatility":0.001},"interval":"500ms"}]}`
		if _, err := sim.LoadScenario(write("good.json", js)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("default scenario round trip", func(t *testing.T) {
		b, err := yaml.Marshal(sim.DefaultScenario())
		if err != nil {
			t.Fatal(err)
		}
		sc, err := sim.LoadScenario(write("default.yaml", string(b)))
		if err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		a := prices(t, 1, time.Second, 30*time.Second)
		e, err := sim.New(sim.Config{Key: "k", Secret: "s", Seed: 1, Scenario: sc, Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		for d := time.Second; d <= 30*time.Second; d += time.Second {
			e.Step(t0.Add(d))
		}
		for n, want := range a {
			if got, _ := e.IndexPrice(n); got.String() != want {
				t.Errorf("%s = %s, want %s", n, got, want)
			}
		}
	})

	bad := []struct{ name, text, want string }{
		{"empty.yaml", "  \n", "file is empty"},
		{"syntax.yaml", "contracts: [", "yaml:"},
		{"unknown.yaml", good + "colour: red\n", "field colour not found"},
		{"typo.yaml", strings.Replace(good, "entryPrice", "entryPrize", 1), "field entryPrize not found"},
		{"badnum.yaml", strings.Replace(good, "balance: 1000", "balance: lots", 1), "lots"},
		{"direction.yaml", strings.Replace(good, "SHORT", "SIDEWAYS", 1), `positions[0] (XBTC): direction must be LONG or SHORT, got "SIDEWAYS"`},
		{"symbol.yaml", strings.Replace(good, "{symbol: XBTC,", "{symbol: XETH,", 1), `symbol "XETH" is not a contract symbol`},
		{"noindex.yaml", strings.Replace(good, "name: BTC", "name: BTCX", 1), `contract "XBTC": no index named "BTC"`},
		{"leverage.yaml", strings.Replace(good, "maxLeverage: 20", "maxLeverage: 0", 1), "riskLimit.maxLeverage must be at least 1"},
		{"mmr.yaml", strings.Replace(good, "maintenanceMarginRate: 0.005", "maintenanceMarginRate: 1.5", 1), "maintenanceMarginRate must be in (0, 1)"},
		{"currency.yaml", strings.Replace(good, "quote: USDT", "quote: EUR", 1), `quote "EUR" is not in currencies`},
		{"duration.yaml", strings.Replace(good, "at: 1m", "at: 60", 1), "want a duration"},
		{"order.yaml", strings.Replace(good, "at: 1m", "at: 0s", 1), "points[1].at must be after points[0].at"},
		{"both.yaml", strings.Replace(good, "    points:", "    walk: {start: 1}\n    points:", 1), "either points or walk"},
		{"orders.yaml", strings.Replace(good, "XBTC: 2", "XBTC: -2", 1), "openOrders[XBTC]: must be in 0..10000"},
		{"quantity.yaml", strings.Replace(good, "quantity: 0.5", "quantity: 0", 1), "quantity must be positive"},
		{"json.json", `{"contracts": 3}`, "line 1 col"},
		{"unknownjson.json", `{"currencies":[],"colour":1}`, `unknown field "colour"`},
		{"nocontracts.yaml", "currencies: [USDT]\n", "at least one contract symbol"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sim.LoadScenario(write(tc.name, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
			if err != nil && !strings.Contains(err.Error(), tc.name) {
				t.Errorf("err = %v does not name the file", err)
			}
		})
	}
	t.Run("every problem at once", func(t *testing.T) {
		text := strings.NewReplacer("SHORT", "UP", "maxLeverage: 20", "maxLeverage: 0", "quote: USDT", "quote: EUR").Replace(good)
		_, err := sim.LoadScenario(write("many.yaml", text))
		if err == nil {
			t.Fatal("accepted")
		}
		for _, want := range []string{"direction", "maxLeverage", "EUR"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("err lacks %q: %v", want, err)
			}
		}
	})
	t.Run("missing file", func(t *testing.T) {
		if _, err := sim.LoadScenario(filepath.Join(dir, "nope.yaml")); err == nil || !os.IsNotExist(unwrapAll(err)) {
			t.Errorf("err = %v", err)
		}
	})
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	if _, err := sim.New(sim.Config{Secret: "s"}); err == nil {
		t.Error("no key accepted")
	}
	bad := sim.DefaultScenario()
	bad.Contracts = nil
	if _, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: bad}); err == nil {
		t.Error("scenario without contracts accepted")
	}
	// New does not change the caller's scenario.
	sc := sim.DefaultScenario()
	sc.Spots[0].BaseIncrement = dec("0")
	if _, err := sim.New(sim.Config{Key: "k", Secret: "s", Scenario: sc}); err != nil {
		t.Fatal(err)
	}
	if !sc.Spots[0].BaseIncrement.IsZero() {
		t.Error("New filled defaults into the caller's scenario")
	}
}
