package exchange

import (
	"bytes"
	"encoding/json"
	"errors"
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
		return nest(err, "position", "riskLimit")
	}
	return nil
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

// ContractByName returns the contract symbol with the given name.
func (t *Trades) ContractByName(name string) (ContractSymbol, bool) {
	for _, s := range t.ContractsSymbols {
		if s.Name == name {
			return s, true
		}
	}
	return ContractSymbol{}, false
}
