package exchange

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/shopspring/decimal"
)

const orderJSON = `{"id":121,"symbol":"XBTC","symbolId":101,"side":"SELL","type":"MARKET","price":"62000","quantity":"0.4",
 "filledQuantity":"0.4","fee":"0","status":"FILLED","flags":24,"createdAt":1763700000000,"updatedAt":1763700000000}`

func TestPlaceOrder(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("POST /v1/contracts/orders/{symbol}/create", func(w http.ResponseWriter, r *http.Request) {
		body := checkSigned(t, r)
		if got, want := string(body), `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`; got != want {
			t.Errorf("body = %s, want %s", got, want)
		}
		if r.PathValue("symbol") != "XBTC" || r.URL.RawQuery != "" {
			t.Errorf("symbol %q, query %q", r.PathValue("symbol"), r.URL.RawQuery)
		}
		writeData(w, orderJSON)
	})
	o, err := c.PlaceOrder(context.Background(), "XBTC", ReduceOnlyIOC(CloseSide(Long), decimal.RequireFromString("0.4")))
	if err != nil {
		t.Fatal(err)
	}
	if o.ID != 121 || o.Status != "FILLED" || o.Flags != ReduceOnly|ImmediateOrCancel || !o.FilledQuantity.Equal(decimal.RequireFromString("0.4")) ||
		!o.Price.Equal(decimal.NewFromInt(62000)) {
		t.Errorf("order = %+v", o)
	}
}

// The path is configurable; {symbol} is replaced, escaped, and the path is
// signed as sent.
func TestPlaceOrderPath(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t, WithOrderPath("/v1/orders/{symbol}"))
	mux.HandleFunc("POST /v1/orders/{symbol}", func(w http.ResponseWriter, r *http.Request) {
		checkSigned(t, r)
		if r.PathValue("symbol") != "X BTC" {
			t.Errorf("symbol = %q", r.PathValue("symbol"))
		}
		writeData(w, orderJSON)
	})
	if _, err := c.PlaceOrder(context.Background(), "X BTC", ReduceOnlyIOC(Buy, decimal.NewFromInt(1))); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"/v1/orders", "/v1/market/orders/{symbol}", "/orders/{symbol}", "/v1/o/{symbol}?x=1", "/v1/{symbol}/{symbol}"} {
		if _, err := New("http://127.0.0.1:1", testKey, testSecret, WithOrderPath(bad)); err == nil {
			t.Errorf("order path %q accepted", bad)
		}
	}
}

// An order is not idempotent: a 5xx or a lost answer is not retried (the
// caller reads the position back), a 429 is; a refusal is a typed error.
func TestPlaceOrderRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		status   int
		code     string
		attempts int32
		ok       bool
	}{
		{"5xx is not retried", 503, "SERVICE_UNAVAILABLE", 1, false},
		{"429 is retried", 429, "RATE_LIMITED", 2, true},
		{"refusal", 400, "REDUCE_ONLY_REJECTED", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t)
			var n atomic.Int32
			mux.HandleFunc("POST /v1/contracts/orders/{symbol}/create", func(w http.ResponseWriter, r *http.Request) {
				checkSigned(t, r)
				if n.Add(1) == 1 {
					writeFailure(w, tt.status, tt.code, "side", "no")
					return
				}
				writeData(w, orderJSON)
			})
			_, err := c.PlaceOrder(context.Background(), "XBTC", ReduceOnlyIOC(Sell, decimal.RequireFromString("0.4")))
			if got := n.Load(); got != tt.attempts {
				t.Errorf("%d attempts, want %d", got, tt.attempts)
			}
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want ok %t", err, tt.ok)
			}
			var ae *APIError
			if err != nil && (!errors.As(err, &ae) || ae.Code != tt.code) {
				t.Errorf("err = %v, want an APIError %s", err, tt.code)
			}
		})
	}
}

// An order without REDUCE_ONLY, or of no quantity, is never sent.
func TestPlaceOrderRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	c, mux, _ := setup(t)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { t.Errorf("sent %s %s", r.Method, r.URL.Path) })
	_, err := c.PlaceOrder(context.Background(), "XBTC", OrderRequest{Side: Sell, Type: OrderMarket, Quantity: decimal.NewFromInt(1), Flags: ImmediateOrCancel})
	if !errors.Is(err, ErrNotReduceOnly) {
		t.Errorf("err = %v, want ErrNotReduceOnly", err)
	}
	if _, err := c.PlaceOrder(context.Background(), "XBTC", ReduceOnlyIOC(Sell, decimal.Zero)); err == nil {
		t.Error("a zero quantity was accepted")
	}
}

// A client order id is sent only where configured, after flags, under the
// configured name; a name that is not a plain field name is refused.
func TestPlaceOrderClientOrderID(t *testing.T) {
	t.Parallel()
	o := ReduceOnlyIOC(Sell, decimal.RequireFromString("0.4"))
	o.ClientOrderID = `rg"1`
	tests := []struct {
		name string
		opts []Option
		want string
	}{
		{"not configured", nil, `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24}`},
		{"configured", []Option{WithClientOrderIDField("clientOrderId")}, `{"side":"SELL","type":"MARKET","quantity":"0.4","flags":24,"clientOrderId":"rg\"1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, mux, _ := setup(t, tt.opts...)
			mux.HandleFunc("POST /v1/contracts/orders/{symbol}/create", func(w http.ResponseWriter, r *http.Request) {
				if got := string(checkSigned(t, r)); got != tt.want {
					t.Errorf("body = %s, want %s", got, tt.want)
				}
				writeData(w, orderJSON)
			})
			if _, err := c.PlaceOrder(context.Background(), "XBTC", o); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, bad := range []string{"", "client id", "a\"b", "quantity", "flags", strings.Repeat("x", 65)} {
		if _, err := New("http://127.0.0.1:1", testKey, testSecret, WithClientOrderIDField(bad)); err == nil {
			t.Errorf("client order id field %q accepted", bad)
		}
	}
}
