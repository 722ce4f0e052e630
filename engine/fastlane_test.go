package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine/journal"
	"github.com/riskguard/riskguard/engine/market"
)

// The lane follows what each tick saw: XBTC starts 4.5% from its
// liquidation price (inside the default fast distance of 5%), a rise of the
// index takes it out, a pending rule puts the guard back in; a failed read
// keeps the lane; a reload changes it from the next tick.
func TestNextIntervalFollowsTheTicks(t *testing.T) {
	t.Parallel()
	r := overMax
	r.For = time.Hour // stays pending
	r.When = "position.symbol == 'XETH' && indexPrice > 3100"
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	m, err := journal.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessWith(t, Config{Interval: 2 * time.Second, FastInterval: 250 * time.Millisecond},
		Deps{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m}, r)
	const fast, normal = 250 * time.Millisecond, 2 * time.Second
	if got := h.e.NextInterval(); got != normal {
		t.Fatalf("before the first tick NextInterval = %s, want %s", got, normal)
	}
	steps := []struct {
		name string
		do   func()
		want time.Duration
	}{
		{"XBTC 4.5% away", func() {}, fast},
		{"BTC up: XBTC 52% away", func() { h.fx.setIndex("BTC", "200000") }, normal},
		{"ETH up: a rule pending on XETH", func() { h.fx.setIndex("ETH", "3200") }, fast},
		{"ETH down: calm", func() { h.fx.setIndex("ETH", "3000") }, normal},
		{"BTC down again", func() { h.fx.setIndex("BTC", "100000") }, fast},
		{"positions unreadable: keep the lane", func() { h.fx.mu.Lock(); h.fx.posErr = errDown; h.fx.mu.Unlock() }, fast},
		{"readable again", func() { h.fx.mu.Lock(); h.fx.posErr = nil; h.fx.mu.Unlock() }, fast},
		{"reloaded with a smaller fast distance", func() {
			h.e.Reconfigure(at(0), h.e.Rules(), Config{Interval: normal, FastInterval: 500 * time.Millisecond, FastDistance: 0.01})
		}, normal},
		{"reloaded with the lane off", func() {
			h.fx.setIndex("BTC", "96000")
			h.e.Reconfigure(at(0), h.e.Rules(), Config{Interval: normal})
		}, normal},
	}
	for i, s := range steps {
		s.do()
		_, err := h.e.Tick(context.Background(), at(2*i))
		if err != nil && !errors.Is(err, market.ErrIncomplete) {
			t.Fatalf("%s: %v", s.name, err)
		}
		if got := h.e.NextInterval(); got != s.want {
			t.Errorf("%s: NextInterval = %s, want %s", s.name, got, s.want)
		}
		gauge := gaugeValue(t, reg, "riskguard_fast_lane")
		if want := map[bool]float64{true: 1, false: 0}[s.want == fast]; gauge != want {
			t.Errorf("%s: riskguard_fast_lane = %v, want %v", s.name, gauge, want)
		}
	}
	out := logs.String()
	for _, want := range []string{
		`msg="fast lane on: XBTC 4.5% from liquidation"`,
		`msg="fast lane on: rule over-max-leverage pending on XETH"`,
		`msg="back to the normal interval"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "fast lane on"); n != 3 {
		t.Errorf("fast lane switched on %d times, want 3 (once per change):\n%s", n, out)
	}
}

// EveryDynamic asks for the interval after every step and stops between
// steps when ctx is done.
func TestEveryDynamic(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var steps, asked int
	done := make(chan struct{})
	go func() {
		defer close(done)
		EveryDynamic(ctx, time.Now, func() time.Duration {
			asked++
			if asked%2 == 0 {
				return 0 // at once
			}
			return time.Millisecond
		}, func(time.Time) {
			steps++
			if steps == 6 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("EveryDynamic did not stop")
	}
	if steps != 6 || asked != 5 {
		t.Errorf("steps %d, intervals asked %d; want 6 and 5", steps, asked)
	}
}

// A long wait ends when ctx is done.
func TestEveryDynamicCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	stepped := make(chan struct{}, 1)
	go func() {
		defer close(done)
		EveryDynamic(ctx, time.Now, func() time.Duration { return time.Hour }, func(time.Time) { stepped <- struct{}{} })
	}()
	<-stepped
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("EveryDynamic did not stop while waiting")
	}
}

// gaugeValue reads an unlabelled gauge from reg.
func gaugeValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}
