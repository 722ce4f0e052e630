package exchange

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// One bad item never fails its answer: it is left out and named, the rest
// decoded.
func TestDecodePerItem(t *testing.T) {
	t.Parallel()
	rl := `"riskLimit":{"maxLeverage":20,"maintenanceMarginRate":"0.005"}`
	good := `{"id":"1_1","symbolId":1,` + rl + `,"cross":true,"leverage":10,"liquidationPrice":"90","direction":"LONG","quantity":"1","empty":false}`
	bad := `{"id":"1_2","symbolId":2,` + rl + `,"cross":true,"leverage":10,"liquidationPrice":"90","direction":"LONG","quantity":"1","empty":false,"riskLevel":"high"}`
	emptyBad := `{"id":"1_3","symbolId":3,"empty":true,"riskLevel":1.5}`
	ps, err := decodePositions([]json.RawMessage{json.RawMessage(good), json.RawMessage(bad), json.RawMessage(emptyBad)})
	var pe *PartialError
	if !errors.As(err, &pe) || len(pe.Items) != 1 || pe.Items[0].ID != "1_2" || pe.Items[0].SymbolID != 2 {
		t.Fatalf("err = %v", err)
	}
	if len(ps) != 2 || ps[0].ID != "1_1" || ps[1].ID != "1_3" || !ps[1].Empty {
		t.Errorf("positions = %+v", ps)
	}

	prices, err := decodeIndexPrices(map[string]json.RawMessage{"BTC": json.RawMessage(`"65000"`), "SOL": json.RawMessage(`"NaN"`)})
	if !errors.As(err, &pe) || len(pe.Items) != 1 || pe.Items[0].ID != "SOL" || !strings.Contains(err.Error(), "index prices: 1 unreadable: SOL:") {
		t.Fatalf("err = %v", err)
	}
	if len(prices) != 1 || prices["BTC"].String() != "65000" {
		t.Errorf("prices = %v", prices)
	}

	tr, err := decodeTrades(nil, []json.RawMessage{json.RawMessage(`{"id":1,"name":"BTC_USDT","baseScale":"six"}`)},
		[]json.RawMessage{json.RawMessage(`{"id":101,"name":"XBTC",` + rl + `}`)})
	if !errors.As(err, &pe) || pe.Items[0].ID != "BTC_USDT" || len(tr.ContractsSymbols) != 1 || len(tr.SpotsSymbols) != 0 {
		t.Errorf("trades = %+v, err = %v", tr, err)
	}
}
