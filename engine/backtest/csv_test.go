package backtest_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/riskguard/riskguard/engine/backtest"
)

func TestCSV(t *testing.T) {
	t.Parallel()
	data := `time,symbol,price
# a comment
2026-03-02T09:00:00Z,SOL,150
2026-03-02T09:00:00Z,XBTC,65000.5
1772442001000,SOL,149.9
2026-03-02T09:00:02.5Z, SOL ,149.8
`
	c := backtest.NewCSVReader("p.csv", strings.NewReader(data))
	type row struct {
		at     time.Time
		prices map[string]string
	}
	want := []row{
		{t0, map[string]string{"SOL": "150", "XBTC": "65000.5"}},
		{t0.Add(time.Second), map[string]string{"SOL": "149.9"}},
		{t0.Add(2500 * time.Millisecond), map[string]string{"SOL": "149.8"}},
	}
	for i, w := range want {
		st, err := c.Next()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !st.Time.Equal(w.at) {
			t.Errorf("step %d at %s, want %s", i, st.Time, w.at)
		}
		if len(st.Prices) != len(w.prices) {
			t.Errorf("step %d: prices %v, want %v", i, st.Prices, w.prices)
		}
		for n, p := range w.prices {
			if st.Prices[n].String() != p {
				t.Errorf("step %d: %s = %s, want %s", i, n, st.Prices[n], p)
			}
		}
	}
	if _, err := c.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last row: %v, want EOF", err)
	}
}

func TestCSVErrors(t *testing.T) {
	t.Parallel()
	const ok = "2026-03-02T09:00:00Z,SOL,150\n"
	tests := []struct {
		name, data, want string
	}{
		{"bad time", ok + "yesterday,SOL,150\n", "p.csv:2: time \"yesterday\": want RFC 3339"},
		{"bad price", ok + ok + "2026-03-02T09:00:01Z,SOL,abc\n", "p.csv:3: price \"abc\" is not a decimal number"},
		{"negative price", ok + "2026-03-02T09:00:01Z,SOL,-1\n", "p.csv:2: price -1 must be positive"},
		{"empty name", ok + "2026-03-02T09:00:01Z,,1\n", "p.csv:2: the symbol or index name is empty"},
		{"time backwards", ok + "2026-03-02T08:59:59Z,SOL,150\n", "p.csv:2: time 2026-03-02T08:59:59Z is before the previous row's"},
		{"field count", ok + "2026-03-02T09:00:01Z,SOL\n", "p.csv:2: wrong number of fields"},
		{"header only mid-file", ok + "time,symbol,price\n", "p.csv:2: time \"time\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := backtest.NewCSVReader("p.csv", strings.NewReader(tt.data))
			var err error
			for range 10 {
				if _, err = c.Next(); err != nil {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// The time field is parsed once per distinct text: the same instant
// written as RFC 3339 and as milliseconds is still one step, and a time
// that repeats after another is parsed again.
func TestCSVTimeTexts(t *testing.T) {
	t.Parallel()
	data := "2026-03-02T09:00:00Z,SOL,150\n1772442000000,ETH,3000\n2026-03-02T09:00:00+00:00,BTC,65000\n" +
		"1772442060000,SOL,151\n-1000,SOL,1\n"
	c := backtest.NewCSVReader("p.csv", strings.NewReader(data))
	st, err := c.Next()
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC); !st.Time.Equal(want) || len(st.Prices) != 3 {
		t.Errorf("first step at %s with %v, want %s with 3 prices", st.Time, st.Prices, want)
	}
	// Milliseconds before the epoch are before the previous row.
	if _, err := c.Next(); err == nil || !strings.Contains(err.Error(), "p.csv:5: time 1969-12-31T23:59:59Z is before") {
		t.Errorf("err = %v, want the time order error of line 5", err)
	}
}
