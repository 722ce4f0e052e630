package ha

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the cluster's gauges and counters; a nil *Metrics records
// nothing.
type Metrics struct {
	leader    *prometheus.GaugeVec
	failovers prometheus.Counter
	handovers *prometheus.CounterVec
	etcdUp    prometheus.Gauge
	age       prometheus.Gauge
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "riskguard_leader",
			Help: "1 while this process leads the account (sends its mutating calls), 0 on a standby."}, []string{"account"}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "riskguard_failovers_total",
			Help: "Leaderships this process took over from another process."}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "riskguard_handovers_total",
			Help: "Leaderships this process handed over to another because the accounts were spread anew (a member joined)."}, []string{"account"}),
		etcdUp: prometheus.NewGauge(prometheus.GaugeOpts{Name: "riskguard_ha_etcd_up",
			Help: "1 when the last request to etcd was answered."}),
		age: prometheus.NewGauge(prometheus.GaugeOpts{Name: "riskguard_ha_lease_age_seconds",
			Help: "Seconds since the send time of the last lease renewal etcd acknowledged."}),
	}
	for _, c := range []prometheus.Collector{m.leader, m.failovers, m.handovers, m.etcdUp, m.age} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) setLeader(account string, on bool) {
	if m == nil {
		return
	}
	v := 0.0
	if on {
		v = 1
	}
	m.leader.WithLabelValues(account).Set(v)
}

func (m *Metrics) failover() {
	if m != nil {
		m.failovers.Inc()
	}
}

// handedOver adds n to the account's hand-overs (0 makes the series).
func (m *Metrics) handedOver(account string, n float64) {
	if m != nil {
		m.handovers.WithLabelValues(account).Add(n)
	}
}

func (m *Metrics) setEtcdUp(up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.etcdUp.Set(v)
}

func (m *Metrics) leaseAge(d time.Duration) {
	if m != nil {
		m.age.Set(d.Seconds())
	}
}
