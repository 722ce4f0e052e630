package exchange

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shopspring/decimal"
)

// positionJSON is a contract position as the settings operation returns it:
// decimals as strings, one long, and a field the spec does not name.
const positionJSON = `{"id":"7_42","userId":7,"symbolId":42,
 "riskLimit":{"id":3,"initialMarginRate":"0.1","maintenanceMarginRate":"0.2","marginRateStep":"0.005","maxLeverage":100,
   "riskLimitBase":"100","riskLimitStep":"50","maxRiskLimitSteps":9,"maxQuantity":"1000","createdAt":1763700000000},
 "cross":false,"createdAt":1763700000000,"updatedAt":1763700000001,"entryValue":"30000.1","entryPrice":"60000.2",
 "margin":"6000.02","leverage":5,"liquidationPrice":"48300.123456789012345678901234","direction":"LONG","quantity":"0.5",
 "realizedPNL":"-1.25","riskLevel":1,"minimumMaintenanceMarginRate":"0.005","minQuantity":"0.001","maxQuantity":"1000",
 "version":12,"empty":false,"someNewField":{"x":1}}`

func TestPositions(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("GET /v1/contracts/positions", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		if r.URL.RawQuery != "" || r.ContentLength > 0 {
			t.Errorf("query %q, content length %d: want none", r.URL.RawQuery, r.ContentLength)
		}
		short := strings.NewReplacer(`"LONG"`, `"SHORT"`, `"id":"7_42"`, `"id":"7_43"`, `"empty":false`, `"empty":true`).Replace(positionJSON)
		writeData(w, "["+positionJSON+","+short+"]")
	})
	ps, err := c.Positions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 {
		t.Fatalf("got %d positions, want 2", len(ps))
	}
	p := ps[0]
	if p.ID != "7_42" || p.UserID != 7 || p.SymbolID != 42 || p.Cross || p.Leverage != 5 || p.Direction != Long ||
		p.Empty || p.Version != 12 || p.RiskLevel != 1 || p.RiskLimit.MaxLeverage != 100 || p.RiskLimit.CreatedAt != 1763700000000 {
		t.Errorf("position = %+v", p)
	}
	for name, tc := range map[string]struct {
		got  decimal.Decimal
		want string
	}{
		"liquidationPrice":  {p.LiquidationPrice, "48300.123456789012345678901234"},
		"quantity":          {p.Quantity, "0.5"},
		"realizedPNL":       {p.RealizedPNL, "-1.25"},
		"margin":            {p.Margin, "6000.02"},
		"entryValue":        {p.EntryValue, "30000.1"},
		"mmr + imr":         {p.RiskLimit.InitialMarginRate.Add(p.RiskLimit.MaintenanceMarginRate), "0.3"},
		"riskLimit.maxQty":  {p.RiskLimit.MaxQuantity, "1000"},
		"position.minQty":   {p.MinQuantity, "0.001"},
		"minimumMaintMRate": {p.MinimumMaintenanceMarginRate, "0.005"},
	} {
		if !tc.got.Equal(decimal.RequireFromString(tc.want)) || tc.got.String() != tc.want {
			t.Errorf("%s = %s, want exactly %s", name, tc.got, tc.want)
		}
	}
	if ps[1].Direction != Short || !ps[1].Empty || ps[1].ID != "7_43" {
		t.Errorf("second position = %+v", ps[1])
	}
}

func TestPositionsPathConfigurable(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t, WithPositionsPath("/v1/contracts/position/list"))
	mux.HandleFunc("GET /v1/contracts/position/list", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		writeData(w, "[]")
	})
	ps, err := c.Positions(context.Background())
	if err != nil || ps == nil || len(ps) != 0 {
		t.Fatalf("Positions = %v, %v; want an empty list", ps, err)
	}
}

func TestClosedOrdersPage(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("GET /v1/contracts/orders/closed", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		if got, want := r.URL.RawQuery, "limit=50&offsetId=0&range=202611"; got != want {
			t.Errorf("query = %q, want %q", got, want)
		}
		writeData(w, `{"hasMore":true,"nextOffsetId":981,"results":[{"id":1,"price":"1.5"}],"range":"202611"}`)
	})
	p, err := c.ClosedOrders(context.Background(), "202611", 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasMore || p.NextOffsetID != 981 || p.Range != "202611" || len(p.Results) != 1 || string(p.Results[0]) != `{"id":1,"price":"1.5"}` {
		t.Errorf("page = %+v", p)
	}
	for _, tc := range []struct {
		rng   string
		limit int
	}{{"2026-11", 50}, {"202613", 50}, {"20261", 50}, {"202611", 0}} {
		if _, err := c.ClosedOrders(context.Background(), tc.rng, 0, tc.limit); err == nil {
			t.Errorf("ClosedOrders(%q, limit %d) accepted", tc.rng, tc.limit)
		}
	}
}

// pagedServer serves closed orders from pages keyed by offsetId.
func pagedServer(t *testing.T, mux *http.ServeMux, pages map[int64]string) *atomic.Int32 {
	t.Helper()
	var hits atomic.Int32
	mux.HandleFunc("GET /v1/contracts/orders/closed", func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		checkSigned(t, r)
		off, _ := strconv.ParseInt(r.URL.Query().Get("offsetId"), 10, 64)
		page, ok := pages[off]
		if !ok {
			writeFailure(w, http.StatusBadRequest, "PARAMETER_INVALID", "offsetId", "unknown offset")
			return
		}
		writeData(w, page)
	})
	return &hits
}

func TestClosedOrdersAll(t *testing.T) {
	t.Parallel()
	threePages := map[int64]string{
		0:   `{"hasMore":true,"nextOffsetId":900,"results":[{"id":1},{"id":2}],"range":"202611"}`,
		900: `{"hasMore":true,"nextOffsetId":450,"results":[{"id":3}],"range":"202611"}`,
		450: `{"hasMore":false,"nextOffsetId":0,"results":[{"id":4}],"range":"202611"}`,
	}
	tests := []struct {
		name     string
		pages    map[int64]string
		maxPages int
		breakAt  int // stop consuming after this many results; 0: never
		want     string
		wantErr  string
		wantHits int32
	}{
		{name: "three pages", pages: threePages, maxPages: 3, want: "1,2,3,4", wantHits: 3},
		{name: "page bound", pages: threePages, maxPages: 2, want: "1,2,3", wantErr: "more than 2 pages", wantHits: 2},
		{name: "caller stops early", pages: threePages, maxPages: 10, breakAt: 2, want: "1,2", wantHits: 1},
		{
			name: "same offset again", maxPages: 10, want: "1,2", wantErr: "does not advance", wantHits: 2,
			pages: map[int64]string{
				0: `{"hasMore":true,"nextOffsetId":7,"results":[{"id":1}],"range":"202611"}`,
				7: `{"hasMore":true,"nextOffsetId":7,"results":[{"id":2}],"range":"202611"}`,
			},
		},
		{
			name: "offset cycles back", maxPages: 10, want: "1,2", wantErr: "does not advance", wantHits: 2,
			pages: map[int64]string{
				0: `{"hasMore":true,"nextOffsetId":7,"results":[{"id":1}],"range":"202611"}`,
				7: `{"hasMore":true,"nextOffsetId":0,"results":[{"id":2}],"range":"202611"}`,
			},
		},
		{
			name: "error mid-way", maxPages: 10, want: "1", wantErr: "PARAMETER_INVALID", wantHits: 2,
			pages: map[int64]string{0: `{"hasMore":true,"nextOffsetId":5,"results":[{"id":1}],"range":"202611"}`},
		},
		{name: "bad max pages", pages: threePages, maxPages: 0, wantErr: "max pages", wantHits: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			hits := pagedServer(t, mux, tt.pages)
			var ids []string
			var gotErr error
			for r, err := range c.ClosedOrdersAll(context.Background(), "202611", 2, tt.maxPages) {
				if err != nil {
					if gotErr != nil {
						t.Errorf("second error yielded: %v", err)
					}
					gotErr = err
					continue
				}
				var o struct{ ID int }
				if err := json.Unmarshal(r, &o); err != nil {
					t.Fatalf("result %s: %v", r, err)
				}
				ids = append(ids, strconv.Itoa(o.ID))
				if tt.breakAt > 0 && len(ids) == tt.breakAt {
					break
				}
			}
			if got := strings.Join(ids, ","); got != tt.want {
				t.Errorf("results = %s, want %s", got, tt.want)
			}
			switch {
			case tt.wantErr == "" && gotErr != nil:
				t.Errorf("error = %v, want none", gotErr)
			case tt.wantErr != "" && (gotErr == nil || !strings.Contains(gotErr.Error(), tt.wantErr)):
				t.Errorf("error = %v, want one containing %q", gotErr, tt.wantErr)
			}
			if tt.name == "page bound" && !errors.Is(gotErr, ErrPageLimit) {
				t.Errorf("error %v does not wrap ErrPageLimit", gotErr)
			}
			if got := hits.Load(); got != tt.wantHits {
				t.Errorf("%d requests, want %d", got, tt.wantHits)
			}
		})
	}
}

func TestSetPositionSettings(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("POST /v1/contracts/positions/{symbol}/settings", func(w http.ResponseWriter, r *http.Request) {
		body := checkSigned(t, r)
		if got, want := string(body), `{"cross":true,"leverage":7}`; got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
		if r.PathValue("symbol") != "XBTC" || r.URL.RawQuery != "" {
			t.Errorf("symbol %q, query %q", r.PathValue("symbol"), r.URL.RawQuery)
		}
		writeData(w, strings.NewReplacer(`"cross":false`, `"cross":true`, `"leverage":5`, `"leverage":7`).Replace(positionJSON))
	})
	p, err := c.SetPositionSettings(context.Background(), "XBTC", Settings{Cross: true, Leverage: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Cross || p.Leverage != 7 || p.SymbolID != 42 {
		t.Errorf("position = %+v", p)
	}
}

func TestCancelOrders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data, want string
	}{
		{"data object", `{"cancelled":3}`, `{"cancelled":3}`},
		{"data null", `null`, ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			mux.HandleFunc("POST /v1/contracts/orders/{symbol}/cancel", func(w http.ResponseWriter, r *http.Request) {
				body := checkSigned(t, r)
				if len(body) != 0 || r.ContentLength != 0 {
					t.Errorf("cancel body %q (length %d), want none", body, r.ContentLength)
				}
				if r.PathValue("symbol") != "X BTC" {
					t.Errorf("symbol = %q", r.PathValue("symbol"))
				}
				writeData(w, tt.data)
			})
			got, err := c.CancelOrders(context.Background(), "X BTC")
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("data = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSpotBalances(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("GET /v1/spots/balances", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		writeData(w, `[{"currency":"BTC","available":"0.1"}]`)
	})
	got, err := c.SpotBalances(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `[{"currency":"BTC","available":"0.1"}]` {
		t.Errorf("balances = %s", got)
	}
}

// Every way an answer can fail, on a signed call that decodes typed data.
func TestErrorPaths(t *testing.T) {
	t.Parallel()
	const route = "/v1/contracts/positions/{symbol}/settings"
	missingLeverage := strings.Replace(positionJSON, `"leverage":5,`, ``, 1)
	tests := []struct {
		name     string
		status   int
		body     string
		attempts int32
		check    func(t *testing.T, err error)
	}{
		{
			name: "success false with 200", status: 200, attempts: 1,
			body:  `{"success":false,"error":"PARAMETER_INVALID","errorField":"leverage","errorMessage":"leverage must be in 1..100"}`,
			check: wantAPIError(200, "PARAMETER_INVALID", "leverage", "leverage must be in 1..100"),
		},
		{
			name: "400 envelope", status: 400, attempts: 1,
			body:  `{"success":false,"error":"PARAMETER_INVALID","errorField":"leverage","errorMessage":"too high"}`,
			check: wantAPIError(400, "PARAMETER_INVALID", "leverage", "too high"),
		},
		{
			name: "401 signature rejected is not retried", status: 401, attempts: 1,
			body:  `{"success":false,"error":"SIGNATURE_INVALID","errorMessage":"bad signature"}`,
			check: wantAPIError(401, "SIGNATURE_INVALID", "", "bad signature"),
		},
		{
			name: "error status with success true", status: 403, attempts: 1, body: `{"success":true,"data":{}}`,
			check: wantAPIError(403, "", "", ""),
		},
		{
			name: "HTML 502 after retries", status: 502, attempts: 4,
			body:  "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>" + strings.Repeat("<p>nginx</p>", 100) + "</body></html>",
			check: wantResponseError(502, "<html> <head><title>502 Bad Gateway</title></head>", nil),
		},
		{
			name: "truncated JSON", status: 200, attempts: 1, body: `{"success":true,"data":{"id":"7_42","lev`,
			check: wantResponseError(200, `{"success":true,"data":{"id":"7_42","lev`, nil),
		},
		{name: "empty body", status: 200, attempts: 1, body: "", check: wantResponseError(200, "", errEmptyBody)},
		{name: "blank body", status: 200, attempts: 1, body: " \n", check: wantResponseError(200, "", errEmptyBody)},
		{name: "no success field", status: 200, attempts: 1, body: `{"data":{}}`, check: wantResponseError(200, `{"data":{}}`, errNoSuccessField)},
		{name: "JSON null", status: 200, attempts: 1, body: `null`, check: wantResponseError(200, `null`, errNoSuccessField)},
		{name: "JSON array", status: 200, attempts: 1, body: `[1]`, check: wantResponseError(200, `[1]`, nil)},
		{name: "trailing garbage", status: 200, attempts: 1, body: `{"success":true,"data":{}} x`, check: wantResponseError(200, "", nil)},
		{name: "no data", status: 200, attempts: 1, body: `{"success":true}`, check: wantResponseError(200, "", errNoData)},
		{name: "data of the wrong type", status: 200, attempts: 1, body: `{"success":true,"data":[1,2]}`, check: wantResponseError(200, "", nil)},
		{
			name: "missing required field", status: 200, attempts: 1, body: `{"success":true,"data":` + missingLeverage + `}`,
			check: func(t *testing.T, err error) {
				wantResponseError(200, "", nil)(t, err)
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Type != "position" || fe.Field != "leverage" {
					t.Errorf("error %v: want FieldError position.leverage", err)
				}
				if !strings.Contains(err.Error(), `position: missing required field "leverage"`) {
					t.Errorf("error text %q does not name the field", err)
				}
			},
		},
		{
			name: "plain text 404 not retried", status: 404, attempts: 1, body: "404 page not found\n",
			check: wantResponseError(404, "404 page not found", nil),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			var hits atomic.Int32
			mux.HandleFunc("POST /v1/contracts/positions/{symbol}/settings", func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				checkSigned(t, r)
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			})
			p, err := c.SetPositionSettings(context.Background(), "XBTC", Settings{Leverage: 500})
			if err == nil {
				t.Fatalf("got position %+v, want an error", p)
			}
			if p != nil {
				t.Errorf("position %+v returned with an error", p)
			}
			tt.check(t, err)
			if !strings.Contains(err.Error(), "POST "+route) {
				t.Errorf("error %q does not name method and route", err)
			}
			if got := hits.Load(); got != tt.attempts {
				t.Errorf("%d attempts, want %d", got, tt.attempts)
			}
		})
	}
}

func wantAPIError(status int, code, field, msg string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var ae *APIError
		if !errors.As(err, &ae) {
			t.Fatalf("error %v (%T) is not an *APIError", err, err)
		}
		want := APIError{Status: status, Code: code, Field: field, Message: msg, Method: "POST", Route: "/v1/contracts/positions/{symbol}/settings"}
		if *ae != want {
			t.Errorf("APIError = %+v, want %+v", *ae, want)
		}
	}
}

func wantResponseError(status int, snippetPrefix string, sentinel error) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var re *ResponseError
		if !errors.As(err, &re) {
			t.Fatalf("error %v (%T) is not a *ResponseError", err, err)
		}
		if re.Status != status || re.Method != "POST" || re.Route != "/v1/contracts/positions/{symbol}/settings" {
			t.Errorf("ResponseError = %+v", re)
		}
		if !strings.HasPrefix(re.Snippet, snippetPrefix) || len(re.Snippet) > maxSnippet {
			t.Errorf("snippet %q (%d bytes), want prefix %q and at most %d bytes", re.Snippet, len(re.Snippet), snippetPrefix, maxSnippet)
		}
		if sentinel != nil && !errors.Is(err, sentinel) {
			t.Errorf("error %v does not wrap %v", err, sentinel)
		}
		if re.Err == nil {
			t.Error("ResponseError without a cause")
		}
		var ae *APIError
		if errors.As(err, &ae) {
			t.Errorf("ResponseError is also an APIError: %v", err)
		}
	}
}

// Every endpoint reports a rejection as an *APIError naming its method and
// route template, and returns no result with it.
func TestEveryEndpointReportsAPIError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		method, route string
		call          func(*Client) (any, error)
	}{
		{"GET", "/v1/market/trades", func(c *Client) (any, error) { return c.Trades(ctx) }},
		{"GET", "/v1/market/timestamp", func(c *Client) (any, error) { return c.ServerTime(ctx) }},
		{"GET", "/v1/market/ticks/{symbol}", func(c *Client) (any, error) { return c.Ticks(ctx, "XBTC") }},
		{"GET", "/v1/market/prices", func(c *Client) (any, error) { return c.Prices(ctx) }},
		{"GET", "/v1/market/bars/{symbol}/{type}", func(c *Client) (any, error) { return c.Bars(ctx, "XBTC", "1m", nil) }},
		{"GET", "/v1/market/orderBook/{symbol}", func(c *Client) (any, error) { return c.OrderBook(ctx, "XBTC") }},
		{"GET", "/v1/market/indexes", func(c *Client) (any, error) { return c.Indexes(ctx) }},
		{"GET", "/v1/market/indexes/{name}", func(c *Client) (any, error) { return c.IndexHistory(ctx, "BTC", nil) }},
		{"GET", "/v1/market/indexes/indexValue", func(c *Client) (any, error) { return c.IndexValue(ctx) }},
		{"GET", "/v1/market/indexPrices", func(c *Client) (any, error) { return c.IndexPrices(ctx) }},
		{"GET", "/v1/market/errorCodes", func(c *Client) (any, error) { return c.ErrorCodes(ctx) }},
		{"GET", "/v1/contracts/positions", func(c *Client) (any, error) { return c.Positions(ctx) }},
		{"GET", "/v1/contracts/orders/closed", func(c *Client) (any, error) { return c.ClosedOrders(ctx, "202611", 0, 10) }},
		{"POST", "/v1/contracts/positions/{symbol}/settings", func(c *Client) (any, error) {
			return c.SetPositionSettings(ctx, "XBTC", Settings{Leverage: 2})
		}},
		{"POST", "/v1/contracts/orders/{symbol}/cancel", func(c *Client) (any, error) { return c.CancelOrders(ctx, "XBTC") }},
		{"GET", "/v1/spots/balances", func(c *Client) (any, error) { return c.SpotBalances(ctx) }},
	}
	c, mux, _ := setup(t)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeFailure(w, http.StatusBadRequest, "NOPE", "", r.Method+" "+r.URL.Path)
	})
	for _, tt := range tests {
		got, err := tt.call(c)
		var ae *APIError
		if !errors.As(err, &ae) || ae.Method != tt.method || ae.Route != tt.route || ae.Code != "NOPE" {
			t.Errorf("%s %s: error %v, want an APIError for that route", tt.method, tt.route, err)
		}
		if v := fmt.Sprint(got); v != "<nil>" && v != "[]" && v != "map[]" && v != "0" && v != "0001-01-01 00:00:00 +0000 UTC" {
			t.Errorf("%s %s: result %s returned with an error", tt.method, tt.route, v)
		}
	}
}

// Concurrent first signed calls measure the clock offset once.
func TestConcurrentFirstCallsSyncOnce(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	c.synced = false
	var stamps atomic.Int32
	mux.HandleFunc("GET /v1/market/timestamp", func(w http.ResponseWriter, r *http.Request) {
		stamps.Add(1)
		writeData(w, strconv.FormatInt(time.Now().UnixMilli(), 10))
	})
	mux.HandleFunc("GET /v1/contracts/positions", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		writeData(w, "["+positionJSON+"]")
	})
	const n = 20
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Positions(context.Background())
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got := stamps.Load(); got != 1 {
		t.Errorf("timestamp fetched %d times, want 1", got)
	}
}

// A 429 whose body is not an envelope still ends as a *RateLimitError.
func TestRateLimitWithoutEnvelope(t *testing.T) {
	t.Parallel()
	c, mux, rec := setup(t, WithRetry(RetryPolicy{MaxAttempts: 2}))
	mux.HandleFunc("GET /v1/spots/balances", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "2")
		http.Error(w, "slow down", http.StatusTooManyRequests)
	})
	_, err := c.SpotBalances(context.Background())
	var rl *RateLimitError
	if !errors.As(err, &rl) || rl.RetryAfter != 2*time.Second || rl.APIError == nil ||
		rl.APIError.Status != 429 || rl.APIError.Message != "slow down" || rl.APIError.Route != "/v1/spots/balances" {
		t.Fatalf("error = %#v", err)
	}
	if want := "rate limited, retry after 2s: GET /v1/spots/balances: status 429: slow down"; err.Error() != "spot balances: "+want {
		t.Errorf("error text %q", err)
	}
	if got := rec.got(); len(got) != 1 || got[0] != 2*time.Second {
		t.Errorf("sleeps = %v", got)
	}
}
