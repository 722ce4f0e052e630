package exchange

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shopspring/decimal"
)

// envelope is the wire form of Envelope with success kept as a pointer, so
// an answer without it is told apart from success:false.
type envelope struct {
	Success      *bool           `json:"success"`
	Data         json.RawMessage `json:"data"`
	Error        string          `json:"error"`
	ErrorField   string          `json:"errorField"`
	ErrorMessage string          `json:"errorMessage"`
}

var (
	errEmptyBody      = errors.New("empty body")
	errNoSuccessField = errors.New(`envelope has no "success" field`)
	errNoData         = errors.New(`envelope has no "data"`)
)

// decodeEnvelope reads the envelope of an answer with any status (spec 7)
// and, on success, decodes its data into v (nil: data ignored; a
// *json.RawMessage receives a copy of data, nil when absent). Failures are
// *APIError (the exchange said no) or *ResponseError (the answer is unusable).
func decodeEnvelope(status int, body []byte, method, route string, v any) error {
	respErr := func(err error) error {
		return &ResponseError{Status: status, Method: method, Route: route, Snippet: snippet(body), Err: err}
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return respErr(errEmptyBody)
	}
	var env envelope
	if err := json.Unmarshal(trimmed, &env); err != nil {
		return respErr(err)
	}
	if env.Success == nil {
		return respErr(errNoSuccessField)
	}
	if !*env.Success || status < 200 || status > 299 {
		return &APIError{Status: status, Code: env.Error, Field: env.ErrorField, Message: env.ErrorMessage, Method: method, Route: route}
	}
	if v == nil {
		return nil
	}
	if raw, ok := v.(*json.RawMessage); ok {
		*raw = nil
		if !isNull(env.Data) {
			*raw = append(json.RawMessage(nil), env.Data...)
		}
		return nil
	}
	if isNull(env.Data) {
		return respErr(errNoData)
	}
	if err := json.Unmarshal(env.Data, v); err != nil {
		return respErr(err)
	}
	return nil
}

// isNull reports whether a raw value is absent or the JSON literal null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// requireFields returns a *FieldError for the first of names that data, a
// JSON object, lacks or holds as null. A null object lacks every field.
func requireFields(typ string, data []byte, names ...string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	for _, n := range names {
		if raw, ok := m[n]; !ok || isNull(raw) {
			return &FieldError{Type: typ, Field: n}
		}
	}
	return nil
}

// nest rewrites a *FieldError of the nested object named field as one of its
// parent, e.g. riskLimit's "maxLeverage" becomes position's
// "riskLimit.maxLeverage".
func nest(err error, typ, field string) error {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Type == field {
		return &FieldError{Type: typ, Field: field + "." + fe.Field}
	}
	return err
}

// UnmarshalJSON decodes a risk limit whose decimals are JSON numbers (market
// data) or decimal strings (positions), without loss. Required: maxLeverage
// and maintenanceMarginRate, the two fields risk decisions read; the others
// are descriptive.
func (r *RiskLimit) UnmarshalJSON(data []byte) error {
	if err := requireFields("riskLimit", data, "maxLeverage", "maintenanceMarginRate"); err != nil {
		return err
	}
	type plain RiskLimit
	return json.Unmarshal(data, (*plain)(r))
}

// UnmarshalJSON decodes a contract position (spec 2.6). Unknown fields are
// ignored. Required — what the guard needs to judge and act on a position —
// id, symbolId, riskLimit (with its own required fields), cross, leverage,
// liquidationPrice, direction, quantity and empty; the other fields
// (entryValue, margin, realizedPNL, …) default to zero when absent.
func (p *Position) UnmarshalJSON(data []byte) error {
	if err := requireFields("position", data,
		"id", "symbolId", "riskLimit", "cross", "leverage", "liquidationPrice", "direction", "quantity", "empty"); err != nil {
		return err
	}
	type plain Position
	if err := json.Unmarshal(data, (*plain)(p)); err != nil {
		return nest(fieldOf(data, err, func() any { return new(plain) }), "position", "riskLimit")
	}
	return nil
}

// fieldOf is err, the error decoding the object data into a fresh value
// of fresh(), named by the first field (by name) that fails on its own:
// a decimal's own error ("can't convert NaN to decimal") says no field.
// A *FieldError, or an error with no field to blame, is returned as it
// is.
func fieldOf(data []byte, err error, fresh func() any) error {
	var fe *FieldError
	var m map[string]json.RawMessage
	if errors.As(err, &fe) || json.Unmarshal(data, &m) != nil {
		return err
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		one, merr := json.Marshal(map[string]json.RawMessage{n: m[n]})
		if merr != nil {
			continue
		}
		if ferr := json.Unmarshal(one, fresh()); ferr != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	return err
}

// UnmarshalJSON decodes a contract symbol (spec 2.4). Required: id, name and
// riskLimit (with maxLeverage and maintenanceMarginRate), which positions
// are resolved and judged against; the other fields default to zero.
func (s *ContractSymbol) UnmarshalJSON(data []byte) error {
	if err := requireFields("contractSymbol", data, "id", "name", "riskLimit"); err != nil {
		return err
	}
	// plain keeps the embedded SpotSymbol, which has no UnmarshalJSON of its
	// own, so every field is decoded here.
	type plain ContractSymbol
	if err := json.Unmarshal(data, (*plain)(s)); err != nil {
		return nest(err, "contractSymbol", "riskLimit")
	}
	return nil
}

// ContractByID returns the contract symbol with the given id. Positions carry
// only symbolId; this resolves their names.
func (t *Trades) ContractByID(id int64) (ContractSymbol, bool) {
	for _, s := range t.ContractsSymbols {
		if s.ID == id {
			return s, true
		}
	}
	return ContractSymbol{}, false
}

// ContractNames returns the contract symbols' names, sorted.
func (t *Trades) ContractNames() []string {
	names := make([]string, 0, len(t.ContractsSymbols))
	for _, s := range t.ContractsSymbols {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// ContractByName returns the contract symbol with the given name.
func (t *Trades) ContractByName(name string) (ContractSymbol, bool) {
	for _, s := range t.ContractsSymbols {
		if s.Name == name {
			return s, true
		}
	}
	return ContractSymbol{}, false
}

// decodePositions decodes each position on its own. An empty position needs
// only its identity (id, symbolId, empty): nothing else of it is read.
func decodePositions(raw []json.RawMessage) ([]Position, error) {
	out := make([]Position, 0, len(raw))
	var bad []ItemError
	for _, r := range raw {
		var p Position
		if err := json.Unmarshal(r, &p); err != nil {
			var id struct {
				ID       string `json:"id"`
				SymbolID int64  `json:"symbolId"`
				Empty    bool   `json:"empty"`
			}
			_ = json.Unmarshal(r, &id)
			if id.Empty && id.ID != "" && id.SymbolID != 0 {
				out = append(out, Position{ID: id.ID, SymbolID: id.SymbolID, Empty: true})
				continue
			}
			bad = append(bad, ItemError{ID: id.ID, SymbolID: id.SymbolID, Err: err})
			continue
		}
		out = append(out, p)
	}
	if len(bad) > 0 {
		return out, &PartialError{What: "positions", Items: bad}
	}
	return out, nil
}

// decodeIndexPrices decodes each price on its own; a price must be a
// finite number.
func decodeIndexPrices(raw map[string]json.RawMessage) (map[string]decimal.Decimal, error) {
	out := make(map[string]decimal.Decimal, len(raw))
	var bad []ItemError
	for name, r := range raw {
		var d decimal.Decimal
		if err := json.Unmarshal(r, &d); err != nil {
			bad = append(bad, ItemError{ID: name, Err: err})
			continue
		}
		out[name] = d
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b ItemError) int { return strings.Compare(a.ID, b.ID) })
		return out, &PartialError{What: "index prices", Items: bad}
	}
	return out, nil
}

// decodeTrades decodes each currency and symbol on its own.
func decodeTrades(currencies, spots, contracts []json.RawMessage) (*Trades, error) {
	var t Trades
	var bad []ItemError
	item := func(r json.RawMessage, v any) bool {
		if err := json.Unmarshal(r, v); err != nil {
			var id struct {
				ID   int64  `json:"id"`
				Name string `json:"name"`
			}
			_ = json.Unmarshal(r, &id)
			bad = append(bad, ItemError{ID: id.Name, SymbolID: id.ID, Err: err})
			return false
		}
		return true
	}
	for _, r := range currencies {
		var c Currency
		if item(r, &c) {
			t.Currencies = append(t.Currencies, c)
		}
	}
	for _, r := range spots {
		var s SpotSymbol
		if item(r, &s) {
			t.SpotsSymbols = append(t.SpotsSymbols, s)
		}
	}
	for _, r := range contracts {
		var s ContractSymbol
		if item(r, &s) {
			t.ContractsSymbols = append(t.ContractsSymbols, s)
		}
	}
	if len(bad) > 0 {
		return &t, &PartialError{What: "symbols", Items: bad}
	}
	return &t, nil
}
