package backtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/shopspring/decimal"
)

// BarsClient reads a contract symbol's bars as raw JSON, [[open time ms,
// open, high, low, close, volume], …] oldest first, paged forward with
// from. *exchange.Client is one.
type BarsClient interface {
	Bars(ctx context.Context, symbol, barType string, q url.Values) (json.RawMessage, error)
}

// BarPrices is what FetchBars replays of a bar.
type BarPrices string

const (
	// BarClose replays one step per bar: the close, at the bar's open time.
	// A price that crosses a liquidation price inside a bar and is back by
	// its close is missed.
	BarClose BarPrices = "close"
	// BarOHLC replays up to four steps per bar: the open at the open time,
	// then low and high (low first when the bar closed at or above its
	// open, else high first) at a quarter and half of the period, and the
	// close at three quarters; a price equal to the one before it in the
	// bar is left out. Every price a bar reached is replayed, so no
	// liquidation inside a bar is missed, but the bar does not say when its
	// low and high were: those times are made up.
	BarOHLC BarPrices = "ohlc"
)

// BarPeriod reads a bar type: a count and a unit, m, h, d or w, as 1m, 4h
// or 1d. The spec does not list the types; the simulated exchange serves
// 1m 5m 15m 30m 1h 4h 1d.
func BarPeriod(barType string) (time.Duration, error) {
	if len(barType) < 2 {
		return 0, fmt.Errorf("bar type %q: want a count and a unit (m, h, d, w) like 1m, 4h or 1d", barType)
	}
	n, err := strconv.Atoi(barType[:len(barType)-1])
	if err != nil || n <= 0 || n > 1000 || barType[0] == '+' {
		return 0, fmt.Errorf("bar type %q: want a count and a unit (m, h, d, w) like 1m, 4h or 1d", barType)
	}
	unit := map[byte]time.Duration{'m': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour}[barType[len(barType)-1]]
	if unit == 0 {
		return 0, fmt.Errorf("bar type %q: want a count and a unit (m, h, d, w) like 1m, 4h or 1d", barType)
	}
	return time.Duration(n) * unit, nil
}

// FetchBars fetches the bars of each contract symbol between from and to
// (page by page, or from the cache) and returns a source that merges them
// by time, each bar's prices under the index its symbol stands for
// (symbols maps a symbol to that index). One symbol per index is fetched:
// the first in name order. The bar holding from is included, though it
// opens before. Close the source when done.
func FetchBars(ctx context.Context, c BarsClient, symbols map[string]string, barType string, from, to time.Time, opt HistoryOptions) (*HistorySource, error) {
	period, err := BarPeriod(barType)
	if err != nil {
		return nil, fmt.Errorf("fetch bars: %w", err)
	}
	if opt.BarPrices == "" {
		opt.BarPrices = BarClose
	}
	if opt.BarPrices != BarClose && opt.BarPrices != BarOHLC {
		return nil, fmt.Errorf("fetch bars: bar prices %q: want %q or %q", opt.BarPrices, BarClose, BarOHLC)
	}
	p := period.Milliseconds()
	decode := func(row []decimal.Decimal, dst []sample) ([]sample, error) {
		if len(row) < 5 {
			return dst, fmt.Errorf("a bar has %d fields, want 6: open time, open, high, low, close, volume", len(row))
		}
		ms, o, h, l, cl := row[0].IntPart(), row[1], row[2], row[3], row[4]
		if opt.BarPrices == BarClose {
			return append(dst, sample{ms: ms, price: cl}), nil
		}
		first, second := l, h
		if cl.LessThan(o) {
			first, second = h, l
		}
		start := len(dst)
		for i, price := range []decimal.Decimal{o, first, second, cl} {
			if len(dst) > start && dst[len(dst)-1].price.Equal(price) {
				continue
			}
			dst = append(dst, sample{ms: ms + int64(i)*p/4, price: price})
		}
		return dst, nil
	}
	names := slices.Sorted(maps.Keys(symbols))
	var list []series
	taken := map[string]bool{}
	for _, sym := range names {
		index := symbols[sym]
		if taken[index] {
			continue
		}
		taken[index] = true
		what := "fetch bars " + sym + " " + barType
		list = append(list, series{
			name:   index,
			label:  sym,
			what:   what,
			key:    "bars/" + sym + "/" + barType + "/" + string(opt.BarPrices),
			stride: p,
			page: func(ctx context.Context, q url.Values) ([][]decimal.Decimal, error) {
				raw, err := c.Bars(ctx, sym, barType, q)
				if err != nil {
					return nil, err
				}
				var rows [][]decimal.Decimal
				if err := json.Unmarshal(raw, &rows); err != nil {
					return nil, fmt.Errorf("decode bars: %w", err)
				}
				return rows, nil
			},
			decode: decode,
		})
	}
	return openSeries(ctx, "fetch bars", list, from, to, opt)
}
