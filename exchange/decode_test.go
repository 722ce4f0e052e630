package exchange

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/shopspring/decimal"
)

// without returns the JSON object obj with the dotted field removed, or set
// to null when null is true.
func without(t *testing.T, obj, field string, null bool) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(obj), &m); err != nil {
		t.Fatal(err)
	}
	if parent, child, ok := strings.Cut(field, "."); ok {
		m[parent] = json.RawMessage(without(t, string(m[parent]), child, null))
	} else if null {
		m[field] = json.RawMessage("null")
	} else {
		delete(m, field)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPositionRequiredFields(t *testing.T) {
	t.Parallel()
	required := []string{"id", "symbolId", "riskLimit", "cross", "leverage", "liquidationPrice", "direction", "quantity", "empty",
		"riskLimit.maxLeverage", "riskLimit.maintenanceMarginRate"}
	for _, field := range required {
		for _, null := range []bool{false, true} {
			name := field + " missing"
			if null {
				name = field + " null"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				var p Position
				err := json.Unmarshal([]byte(without(t, positionJSON, field, null)), &p)
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Type != "position" || fe.Field != field {
					t.Fatalf("error = %v, want FieldError for position field %q", err, field)
				}
				if want := `position: missing required field "` + field + `"`; err.Error() != want {
					t.Errorf("error text %q, want %q", err, want)
				}
			})
		}
	}
	// Optional fields may be absent; unknown fields are ignored.
	for _, field := range []string{"userId", "entryValue", "margin", "realizedPNL", "riskLimit.createdAt", "riskLimit.riskLimitBase", "someNewField"} {
		var p Position
		if err := json.Unmarshal([]byte(without(t, positionJSON, field, false)), &p); err != nil {
			t.Errorf("without optional %s: %v", field, err)
		}
	}
	var ps []Position
	if err := json.Unmarshal([]byte("[null]"), &ps); err == nil {
		t.Error("a null position decoded")
	}
}

func TestContractSymbolRequiredFields(t *testing.T) {
	t.Parallel()
	var tr struct {
		ContractsSymbols []json.RawMessage `json:"contractsSymbols"`
	}
	if err := json.Unmarshal([]byte(tradesJSON), &tr); err != nil {
		t.Fatal(err)
	}
	sym := string(tr.ContractsSymbols[0])
	for _, field := range []string{"id", "name", "riskLimit", "riskLimit.maxLeverage", "riskLimit.maintenanceMarginRate"} {
		for _, null := range []bool{false, true} {
			var s ContractSymbol
			err := json.Unmarshal([]byte(without(t, sym, field, null)), &s)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Type != "contractSymbol" || fe.Field != field {
				t.Errorf("without %s (null %v): error = %v, want FieldError", field, null, err)
			}
		}
	}
	var s ContractSymbol
	if err := json.Unmarshal([]byte(sym), &s); err != nil {
		t.Fatal(err)
	}
	// Embedded spot fields are decoded too.
	if s.ID != 42 || s.Name != "XBTC" || s.BaseName != "BTC" || s.QuoteScale != 1 || s.Type != "FUTURES" {
		t.Errorf("symbol = %+v", s)
	}
}

// Risk-limit decimals arrive as numbers (market) and strings (positions);
// both decode exactly, including values a float64 would round.
func TestRiskLimitDecimalsBothForms(t *testing.T) {
	t.Parallel()
	long := "123456789012345678901234567890.123456789012345678901"
	tests := []struct {
		name string
		json string
	}{
		{"numbers", `{"maxLeverage":50,"initialMarginRate":0.1,"maintenanceMarginRate":0.2,"riskLimitBase":` + long + `,"maxQuantity":1e3}`},
		{"strings", `{"maxLeverage":50,"initialMarginRate":"0.1","maintenanceMarginRate":"0.2","riskLimitBase":"` + long + `","maxQuantity":"1000"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var rl RiskLimit
			if err := json.Unmarshal([]byte(tt.json), &rl); err != nil {
				t.Fatal(err)
			}
			if sum := rl.InitialMarginRate.Add(rl.MaintenanceMarginRate); !sum.Equal(decimal.RequireFromString("0.3")) {
				t.Errorf("0.1 + 0.2 = %s", sum)
			}
			if rl.RiskLimitBase.String() != long {
				t.Errorf("riskLimitBase = %s, want %s", rl.RiskLimitBase, long)
			}
			if !rl.MaxQuantity.Equal(decimal.NewFromInt(1000)) || rl.MaxLeverage != 50 {
				t.Errorf("risk limit = %+v", rl)
			}
		})
	}
	var rl RiskLimit
	if err := json.Unmarshal([]byte(`{"maxLeverage":1,"maintenanceMarginRate":"zero"}`), &rl); err == nil {
		t.Error("a non-decimal string decoded")
	}
}

func TestSnippet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
	}{
		{"", ""},
		{"  <p>\n\tBad   Gateway</p> ", "<p> Bad Gateway</p>"},
		{"\xff\xfeok", "\uFFFDok"},
		{strings.Repeat("a", 300), strings.Repeat("a", 197) + "…"},
		{strings.Repeat("é", 300), strings.Repeat("é", 98) + "…"},
	}
	for _, tt := range tests {
		got := snippet([]byte(tt.in))
		if got != tt.want {
			t.Errorf("snippet(%.20q…) = %q, want %q", tt.in, got, tt.want)
		}
		if len(got) > maxSnippet || !utf8.ValidString(got) {
			t.Errorf("snippet %q: %d bytes, valid UTF-8 %v", got, len(got), utf8.ValidString(got))
		}
	}
}

func TestDecodeEnvelopeRawData(t *testing.T) {
	t.Parallel()
	var raw json.RawMessage = json.RawMessage("stale")
	if err := decodeEnvelope(200, []byte(`{"success":true}`), "GET", "/r", &raw); err != nil || raw != nil {
		t.Errorf("absent data: raw %q, err %v; want nil, nil", raw, err)
	}
	body := []byte(`{"success":true,"data":{"a":1}}`)
	if err := decodeEnvelope(200, body, "GET", "/r", &raw); err != nil || string(raw) != `{"a":1}` {
		t.Errorf("raw %q, err %v", raw, err)
	}
	body[len(body)-3] = '9' // the raw data must not alias the body
	if string(raw) != `{"a":1}` {
		t.Errorf("raw data aliases the response body: %q", raw)
	}
	if err := decodeEnvelope(201, []byte(`{"success":true,"data":1}`), "GET", "/r", nil); err != nil {
		t.Errorf("2xx with nil v: %v", err)
	}
}

// fuzzClient answers every request with the fuzzed status and body, without
// retries or waits.
func fuzzClient(f *testing.F, status *int, body *[]byte) *Client {
	hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: *status, Header: http.Header{"Retry-After": {"1"}}, Body: io.NopCloser(bytes.NewReader(*body))}, nil
	})}
	c, err := New("https://api.example.com", "k", "s", WithHTTPClient(hc), WithRateLimit(0, 0), WithRetry(RetryPolicy{MaxAttempts: 1}))
	if err != nil {
		f.Fatal(err)
	}
	c.synced = true
	return c
}

// FuzzDecodeEnvelope feeds arbitrary bytes as an answer through the whole
// do path. It must never panic, and every failure is one of the typed
// errors.
func FuzzDecodeEnvelope(f *testing.F) {
	f.Add(200, []byte(`{"success":true,"data":[`+positionJSON+`]}`))
	f.Add(200, []byte(`{"success":false,"error":"PARAMETER_INVALID","errorField":"leverage","errorMessage":"x"}`))
	f.Add(502, []byte("<html><body>502 Bad Gateway</body></html>"))
	f.Add(200, []byte(`{"success":true,"data":{"id":"7_42","lev`))
	f.Add(200, []byte(``))
	f.Add(429, []byte(`{"success":false,"error":"TOO_MANY"}`))
	f.Add(200, []byte(`{"success":true,"data":[{"riskLimit":null}]}`))
	f.Add(200, []byte(`{"success":true,"data":[{"id":"1","symbolId":1,"riskLimit":{"maxLeverage":1,"maintenanceMarginRate":1e99999},"cross":true,"leverage":1,"liquidationPrice":"1","direction":"LONG","quantity":"1","empty":false}]}`))
	var status int
	var body []byte
	c := fuzzClient(f, &status, &body)
	f.Fuzz(func(t *testing.T, st int, b []byte) {
		status, body = 100+abs(st)%500, b
		ps, err := c.Positions(context.Background())
		if err == nil {
			if status < 200 || status > 299 {
				t.Fatalf("status %d accepted", status)
			}
			if ps == nil {
				t.Fatalf("nil positions without error for %q", b)
			}
			return
		}
		var ae *APIError
		var re *ResponseError
		var rl *RateLimitError
		var pe *PartialError
		if errors.As(err, &pe) {
			// Some positions could not be decoded: the others come with it.
			if ps == nil || len(pe.Items) == 0 {
				t.Fatalf("partial error %v with positions %v", err, ps)
			}
			return
		}
		if !errors.As(err, &ae) && !errors.As(err, &re) && !errors.As(err, &rl) {
			t.Fatalf("untyped error %T: %v", err, err)
		}
		if re != nil && (len(re.Snippet) > maxSnippet || !utf8.ValidString(re.Snippet)) {
			t.Fatalf("bad snippet %q", re.Snippet)
		}
		_ = err.Error()
		// Raw data must decode on the same body without panicking too.
		_ = decodeEnvelope(status, b, "GET", "/r", new(json.RawMessage))
	})
}

func abs(n int) int {
	if n < 0 {
		if n == -n { // math.MinInt
			return 0
		}
		return -n
	}
	return n
}

// FuzzDecodePosition decodes arbitrary JSON as a position: never a panic,
// and what decodes survives a round trip unchanged.
func FuzzDecodePosition(f *testing.F) {
	f.Add([]byte(positionJSON))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"id":"1","symbolId":1,"riskLimit":{"maxLeverage":1,"maintenanceMarginRate":"1e-7"},"cross":true,"leverage":1,"liquidationPrice":1e5,"direction":"LONG","quantity":"-0.000","empty":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Position
		if err := json.Unmarshal(b, &p); err != nil {
			return
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal decoded position: %v", err)
		}
		var q Position
		if err := json.Unmarshal(out, &q); err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		again, err := json.Marshal(q)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out, again) {
			t.Fatalf("round trip changed the position:\n%s\n%s", out, again)
		}
	})
}
