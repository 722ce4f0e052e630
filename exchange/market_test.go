package exchange

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// tradesJSON is market data: risk-limit decimals are JSON numbers, one of
// them longer than a float64 holds, and a field the spec does not name.
const tradesJSON = `{
 "currencies":[{"id":1,"name":"BTC"},{"id":2,"name":"USDT"}],
 "spotsSymbols":[{"id":10,"name":"BTC_USDT","startTime":1,"endTime":2,"baseName":"BTC","baseMinimumIncrement":0.0001,
   "baseScale":4,"baseMaximumQuantity":100,"quoteName":"USDT","quoteMinimumIncrement":0.01,"quoteScale":2}],
 "contractsSymbols":[{"id":42,"name":"XBTC","startTime":1,"endTime":0,"baseName":"BTC","baseMinimumIncrement":0.001,
   "baseScale":3,"baseMaximumQuantity":1000,"quoteName":"USDT","quoteMinimumIncrement":0.5,"quoteScale":1,
   "type":"FUTURES","settlementFeeRate":0.0005,"futureField":true,
   "riskLimit":{"id":3,"initialMarginRate":0.1,"maintenanceMarginRate":0.2,"marginRateStep":0.005,"maxLeverage":100,
     "riskLimitBase":123456789012345678901234567890.123456789012345678901,"riskLimitStep":50,"maxRiskLimitSteps":9,
     "maxQuantity":1000,"createdAt":1763700000000}}]
}`

func TestMarketEndpoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name    string
		pattern string // mux pattern, method included
		query   string // expected raw query
		data    string
		call    func(*Client) (any, error)
		want    string // fmt.Sprint of the result
		params  map[string]string
	}{
		{
			name: "trades", pattern: "GET /v1/market/trades", data: tradesJSON,
			call: func(c *Client) (any, error) {
				tr, err := c.Trades(ctx)
				if err != nil {
					return nil, err
				}
				s, ok := tr.ContractByID(42)
				if !ok {
					return nil, fmt.Errorf("contract 42 not found")
				}
				byName, _ := tr.ContractByName("XBTC")
				return fmt.Sprintln(len(tr.Currencies), tr.Currencies[1].Name, tr.SpotsSymbols[0].QuoteMinimumIncrement,
					s.Name, s.Type, s.BaseMinimumIncrement, s.SettlementFeeRate, s.RiskLimit.MaxLeverage,
					s.RiskLimit.InitialMarginRate.Add(s.RiskLimit.MaintenanceMarginRate), s.RiskLimit.RiskLimitBase, byName.ID), nil
			},
			want: "2 USDT 0.01 XBTC FUTURES 0.001 0.0005 100 0.3 123456789012345678901234567890.123456789012345678901 42\n",
		},
		{
			name: "server time", pattern: "GET /v1/market/timestamp", data: "1763700000123",
			call: func(c *Client) (any, error) { return c.ServerTime(ctx) },
			want: time.UnixMilli(1763700000123).UTC().String(),
		},
		{
			name: "ticks escapes the symbol", pattern: "GET /v1/market/ticks/{symbol}", data: `[[1,"2"]]`,
			params: map[string]string{"symbol": "BTC/USD 1"},
			call:   func(c *Client) (any, error) { r, err := c.Ticks(ctx, "BTC/USD 1"); return string(r), err },
			want:   `[[1,"2"]]`,
		},
		{
			name: "prices", pattern: "GET /v1/market/prices", data: `{"XBTC":[60000.1,0.1,0.2],"XETH":[]}`,
			call: func(c *Client) (any, error) {
				m, err := c.Prices(ctx)
				if err != nil {
					return nil, err
				}
				return fmt.Sprint(m, m["XBTC"][1].Add(m["XBTC"][2])), nil
			},
			want: "map[XBTC:[60000.1 0.1 0.2] XETH:[]] 0.3",
		},
		{
			name: "bars with query", pattern: "GET /v1/market/bars/{symbol}/{type}", data: `{"bars":[]}`,
			params: map[string]string{"symbol": "XBTC", "type": "1m"}, query: "from=1&to=2",
			call: func(c *Client) (any, error) {
				r, err := c.Bars(ctx, "XBTC", "1m", url.Values{"to": {"2"}, "from": {"1"}})
				return string(r), err
			},
			want: `{"bars":[]}`,
		},
		{
			name: "order book", pattern: "GET /v1/market/orderBook/{symbol}", data: `{"asks":[],"bids":[]}`,
			params: map[string]string{"symbol": "XBTC"},
			call:   func(c *Client) (any, error) { r, err := c.OrderBook(ctx, "XBTC"); return string(r), err },
			want:   `{"asks":[],"bids":[]}`,
		},
		{
			name: "indexes", pattern: "GET /v1/market/indexes", data: `["BTC","ETH"]`,
			call: func(c *Client) (any, error) { r, err := c.Indexes(ctx); return string(r), err },
			want: `["BTC","ETH"]`,
		},
		{
			name: "index history", pattern: "GET /v1/market/indexes/{name}", data: `[[1763700000000,60000.25],[1763700060000,"60001.5"]]`,
			params: map[string]string{"name": "BTC"}, query: "limit=2",
			call: func(c *Client) (any, error) { return c.IndexHistory(ctx, "BTC", url.Values{"limit": {"2"}}) },
			want: "[[1763700000000 60000.25] [1763700060000 60001.5]]",
		},
		{
			name: "index value", pattern: "GET /v1/market/indexes/indexValue", data: `60000.123456789012345678`,
			call: func(c *Client) (any, error) { return c.IndexValue(ctx) },
			want: "60000.123456789012345678",
		},
		{
			name: "index prices", pattern: "GET /v1/market/indexPrices", data: `{"BTC":60000.5,"ETH":"3000.25"}`,
			call: func(c *Client) (any, error) { return c.IndexPrices(ctx) },
			want: "map[BTC:60000.5 ETH:3000.25]",
		},
		{
			name: "error codes", pattern: "GET /v1/market/errorCodes", data: `{"PARAMETER_INVALID":"invalid parameter"}`,
			call: func(c *Client) (any, error) { return c.ErrorCodes(ctx) },
			want: "map[PARAMETER_INVALID:invalid parameter]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			var hits atomic.Int32
			mux.HandleFunc(tt.pattern, func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				checkPublic(t, r)
				for k, want := range tt.params {
					if got := r.PathValue(k); got != want {
						t.Errorf("path value %s = %q, want %q", k, got, want)
					}
				}
				if r.URL.RawQuery != tt.query {
					t.Errorf("query = %q, want %q", r.URL.RawQuery, tt.query)
				}
				writeData(w, tt.data)
			})
			got, err := tt.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if s := fmt.Sprint(got); s != tt.want {
				t.Errorf("got  %s\nwant %s", s, tt.want)
			}
			if n := hits.Load(); n != 1 {
				t.Errorf("handler hit %d times, want 1", n)
			}
		})
	}
}

func TestPathParametersRefused(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request sent for a refused parameter: %s", r.URL)
	})
	ctx := context.Background()
	for _, s := range []string{"", ".", ".."} {
		if _, err := c.Ticks(ctx, s); err == nil {
			t.Errorf("Ticks(%q) succeeded", s)
		}
		if _, err := c.SetPositionSettings(ctx, s, Settings{Leverage: 1}); err == nil {
			t.Errorf("SetPositionSettings(%q) succeeded", s)
		}
		if _, err := c.Bars(ctx, "XBTC", s, nil); err == nil {
			t.Errorf("Bars type %q succeeded", s)
		}
	}
}

func TestMarketDecimalsAreExact(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("GET /v1/market/trades", func(w http.ResponseWriter, r *http.Request) { writeData(w, tradesJSON) })
	tr, err := c.Trades(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rl := tr.ContractsSymbols[0].RiskLimit
	if sum := rl.InitialMarginRate.Add(rl.MaintenanceMarginRate); !sum.Equal(decimal.RequireFromString("0.3")) {
		t.Errorf("0.1 + 0.2 = %s, want exactly 0.3", sum)
	}
}
