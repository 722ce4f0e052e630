package journal

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riskguard/riskguard/engine/alert"
	"github.com/riskguard/riskguard/exchange/margin"
)

// Metrics are the guard's Prometheus collectors. A nil *Metrics records
// nothing, so tests and backtests need none.
type Metrics struct {
	ticks        *prometheus.CounterVec
	tickDuration prometheus.Histogram
	snapshotAge  prometheus.Gauge
	ruleStates   *prometheus.GaugeVec
	ruleErrors   *prometheus.CounterVec
	actions      *prometheus.CounterVec
	requests     *prometheus.CounterVec
	breakerOpen  prometheus.Gauge
	auditErrors  prometheus.Counter
	mismatches   *prometheus.CounterVec
	liquidations *prometheus.CounterVec
	changes      *prometheus.CounterVec
	badItems     *prometheus.GaugeVec
	symFailures  *prometheus.GaugeVec
	auditPending prometheus.Gauge
	fastLane     prometheus.Gauge
	silences     prometheus.Gauge
	paused       prometheus.Gauge
	modelFit     *prometheus.GaugeVec
	modelError   prometheus.Gauge
}

// NewMetrics creates the collectors and registers them on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_ticks_total", Help: "Ticks run, by result (ok or error).",
		}, []string{"result"}),
		tickDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "riskguard_tick_duration_seconds", Help: "Duration of one tick, reads and actions included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		snapshotAge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_snapshot_age_seconds", Help: "Age of the last complete snapshot at the last tick.",
		}),
		ruleStates: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "riskguard_rule_positions", Help: "Positions per rule and state.",
		}, []string{"rule", "state"}),
		ruleErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_rule_errors_total", Help: "Run-time evaluation failures per rule.",
		}, []string{"rule"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_actions_total", Help: "Actions by kind and result (ok, error, skipped, dry_run).",
		}, []string{"action", "result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_exchange_requests_total", Help: "Exchange requests by route and HTTP status (0: transport error).",
		}, []string{"route", "status"}),
		breakerOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_breaker_open", Help: "1 while the action budget's circuit breaker is open.",
		}),
		auditErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "riskguard_audit_errors_total", Help: "Audit log records that could not be written.",
		}),
		badItems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "riskguard_unreadable_items", Help: "Items of the last answers that could not be decoded and were left out, by listing.",
		}, []string{"listing"}),
		liquidations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_liquidations_total", Help: "Positions the guard saw liquidated (gone or emptied at or near their liquidation price), by symbol.",
		}, []string{"symbol"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_position_changes_total", Help: "Changes of a position the guard did not make, by symbol and change (closed, grew, reduced, turned).",
		}, []string{"symbol", "change"}),
		mismatches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "riskguard_model_mismatch_total", Help: "Settings calls whose read-back liquidation price the margin model did not predict, per symbol.",
		}, []string{"symbol"}),
		symFailures: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "riskguard_symbol_action_failures", Help: "Consecutive failed action calls per symbol, which back off on their own; 0 once a call succeeds.",
		}, []string{"symbol"}),
		auditPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_audit_pending_records", Help: "Audit records that could not be written yet, kept in memory and written when the log accepts them.",
		}),
		fastLane: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_fast_lane", Help: "1 while the guard ticks every engine.fast_interval (a rule pending or firing, or a position near liquidation), 0 at engine.interval.",
		}),
		silences: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_silences_active", Help: "Silences and acknowledgements muting notifications now.",
		}),
		paused: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_paused", Help: "Pauses in force (0: not paused); while one is, the actions it matches are not sent.",
		}),
		modelFit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "riskguard_model_fit", Help: "1 while the margin model reproduces the exchange's own figures within engine.model_tolerance, per symbol and for the account (symbol=\"account\"); 0 when it does not.",
		}, []string{"symbol"}),
		modelError: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "riskguard_model_worst_error", Help: "The margin model's worst relative error against the exchange's figures at the last check.",
		}),
	}
	for _, c := range []prometheus.Collector{m.modelFit, m.modelError, m.ticks, m.tickDuration, m.snapshotAge, m.ruleStates, m.ruleErrors, m.actions, m.requests, m.breakerOpen, m.auditErrors, m.mismatches, m.liquidations, m.changes, m.badItems, m.symFailures, m.auditPending, m.fastLane, m.silences, m.paused} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ObserveRequest counts one exchange request; wire it to the client's
// request hook.
func (m *Metrics) ObserveRequest(route string, status int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
}

// TickDone records a tick: its result and duration, the snapshot age, the rule states and the breaker.
func (m *Metrics) TickDone(err error, d, age time.Duration, states map[string]*[4]int, breakerOpen bool) {
	if m == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.ticks.WithLabelValues(result).Inc()
	m.tickDuration.Observe(d.Seconds())
	m.snapshotAge.Set(age.Seconds())
	m.ruleStates.Reset()
	for rule, c := range states {
		for s, n := range c {
			m.ruleStates.WithLabelValues(rule, alert.State(s).String()).Set(float64(n))
		}
	}
	if breakerOpen {
		m.breakerOpen.Set(1)
	} else {
		m.breakerOpen.Set(0)
	}
}

// Action counts an action of kind by its result.
func (m *Metrics) Action(kind, result string) {
	if m == nil {
		return
	}
	m.actions.WithLabelValues(kind, result).Inc()
}

// RuleError counts a rule failing at run time.
func (m *Metrics) RuleError(rule string) {
	if m == nil {
		return
	}
	m.ruleErrors.WithLabelValues(rule).Inc()
}

// AuditError counts a failed audit write.
func (m *Metrics) AuditError() {
	if m == nil {
		return
	}
	m.auditErrors.Inc()
}

// ModelMismatch counts the exchange disagreeing with the margin model on symbol.
func (m *Metrics) ModelMismatch(symbol string) {
	if m == nil {
		return
	}
	m.mismatches.WithLabelValues(symbol).Inc()
}

// Liquidation counts a position the guard saw liquidated.
func (m *Metrics) Liquidation(symbol string) {
	if m == nil {
		return
	}
	m.liquidations.WithLabelValues(symbol).Inc()
}

// PositionChange counts a change of a position the guard did not make.
func (m *Metrics) PositionChange(symbol, change string) {
	if m == nil {
		return
	}
	m.changes.WithLabelValues(symbol, change).Inc()
}

// ModelFit sets the margin model's fit, per symbol and for the account.
func (m *Metrics) ModelFit(f margin.Fit) {
	if m == nil {
		return
	}
	m.modelFit.Reset()
	b := func(ok bool) float64 {
		if ok {
			return 1
		}
		return 0
	}
	for _, p := range f.Positions {
		m.modelFit.WithLabelValues(p.Symbol).Set(b(p.Fits(f.Tolerance)))
	}
	m.modelFit.WithLabelValues("account").Set(b(f.Fits()))
	if math.IsInf(f.Worst, 0) {
		m.modelError.Set(math.MaxFloat64)
	} else {
		m.modelError.Set(f.Worst)
	}
}

// Unreadable sets the unreadable items of the last answers, by what was read.
func (m *Metrics) Unreadable(counts map[string]int) {
	if m == nil {
		return
	}
	for _, what := range []string{"positions", "index prices", "symbols"} {
		m.badItems.WithLabelValues(what).Set(float64(counts[what]))
	}
}

// SymbolFailures sets the failed calls in a row on symbol.
func (m *Metrics) SymbolFailures(symbol string, n int) {
	if m == nil {
		return
	}
	m.symFailures.WithLabelValues(symbol).Set(float64(n))
}

// AuditBacklog sets the audit records waiting to be written.
func (m *Metrics) AuditBacklog(n int) {
	if m == nil {
		return
	}
	m.auditPending.Set(float64(n))
}

// FastLaneOn sets whether the guard is in the fast lane.
func (m *Metrics) FastLaneOn(on bool) {
	if m == nil {
		return
	}
	if on {
		m.fastLane.Set(1)
	} else {
		m.fastLane.Set(0)
	}
}

// Control sets the silences muting and the pauses in force.
func (m *Metrics) Control(silences, pauses int) {
	if m == nil {
		return
	}
	m.silences.Set(float64(silences))
	m.paused.Set(float64(pauses))
}
