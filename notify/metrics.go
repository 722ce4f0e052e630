package notify

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Collector returns a Prometheus collector of the dispatcher's counters,
// read from Stats at scrape time:
//
//	riskguard_notify_messages_total{channel,type,result}  sent, failed, dropped, retried, merged, suppressed
//	riskguard_notify_queue_length{channel,type}
//	riskguard_notify_heartbeats_total{result}              sent, failed, missed
//
// Register it once: reg.MustRegister(d.Collector()).
func (d *Dispatcher) Collector() prometheus.Collector {
	return &collector{
		d: d,
		messages: prometheus.NewDesc("riskguard_notify_messages_total",
			"Notifications by channel and what happened to them.", []string{"channel", "type", "result"}, nil),
		queue: prometheus.NewDesc("riskguard_notify_queue_length",
			"Notifications waiting in a channel's queue.", []string{"channel", "type"}, nil),
		heartbeats: prometheus.NewDesc("riskguard_notify_heartbeats_total",
			"Dead man's switch pings by result.", []string{"result"}, nil),
	}
}

type collector struct {
	d                           *Dispatcher
	messages, queue, heartbeats *prometheus.Desc
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.messages
	ch <- c.queue
	ch <- c.heartbeats
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	stats := c.d.Stats()
	for _, name := range c.d.names {
		s := stats[name]
		for _, r := range []struct {
			result string
			v      uint64
		}{
			{"sent", s.Sent}, {"failed", s.Failed}, {"dropped", s.Dropped},
			{"retried", s.Retried}, {"merged", s.Merged}, {"suppressed", s.Suppressed},
		} {
			ch <- prometheus.MustNewConstMetric(c.messages, prometheus.CounterValue, float64(r.v), name, s.Type, r.result)
		}
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(s.Queued), name, s.Type)
	}
	if c.d.hb != nil {
		h := c.d.HeartbeatStats()
		ch <- prometheus.MustNewConstMetric(c.heartbeats, prometheus.CounterValue, float64(h.Sent), "sent")
		ch <- prometheus.MustNewConstMetric(c.heartbeats, prometheus.CounterValue, float64(h.Failed), "failed")
		ch <- prometheus.MustNewConstMetric(c.heartbeats, prometheus.CounterValue, float64(h.Missed), "missed")
	}
}
