package sim_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/riskguard/riskguard/exchange/sim"
)

// BenchmarkServe measures one answer of the two calls a guard's tick makes,
// without the network (httptest.ResponseRecorder).
func BenchmarkServe(b *testing.B) {
	e, err := sim.New(sim.Config{Key: testKey, Secret: testSecret, Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	for _, path := range []string{"/v1/market/indexPrices", "/v1/contracts/positions"} {
		b.Run(path, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "http://sim.test"+path, nil)
			sign(req, call{})
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				e.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkStep measures one second of simulated time for the default
// scenario's four indexes, liquidation check included.
func BenchmarkStep(b *testing.B) {
	e, err := sim.New(sim.Config{Key: testKey, Secret: testSecret, Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		e.Step(t0.Add(time.Duration(i) * time.Second))
	}
}
