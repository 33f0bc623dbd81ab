package bot

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"vouch.dev/vouch/evidence"
)

// Metrics are the service's Prometheus metrics, on a registry of their own
// (no global state). A nil *Metrics records nothing.
type Metrics struct {
	registry        *prometheus.Registry
	deliveries      *prometheus.CounterVec
	jobDuration     *prometheus.HistogramVec
	sandboxFailures prometheus.Counter
}

// NewMetrics registers vouch's metrics, the Go runtime's and the process's.
// depth, when set, is read at each scrape as the queue depth.
func NewMetrics(depth func(context.Context) (int, error)) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vouch_webhook_deliveries_total",
			Help: "Webhook deliveries received, by forge, event and result (queued, duplicate, ignored, rejected, error).",
		}, []string{"forge", "event", "result"}),
		jobDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vouch_verification_duration_seconds",
			Help:    "Time from a verification attempt's start to its verdict, by outcome and reason.",
			Buckets: []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600},
		}, []string{"outcome", "reason"}),
		sandboxFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vouch_sandbox_failures_total",
			Help: "Verifications whose sandbox could not be launched or proven isolated.",
		}),
	}
	m.registry.MustRegister(m.deliveries, m.jobDuration, m.sandboxFailures,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if depth != nil {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vouch_queue_depth",
			Help: "Jobs queued or running (available, scheduled, retryable, running).",
		}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			n, err := depth(ctx)
			if err != nil {
				return -1
			}
			return float64(n)
		}))
	}
	return m
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// delivery counts one webhook delivery.
func (m *Metrics) delivery(forgeName, event, result string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(forgeName, event, result).Inc()
}

// jobDone records a verification's duration under its verdict.
func (m *Metrics) jobDone(rc evidence.Receipt, d time.Duration) {
	if m == nil {
		return
	}
	m.jobDuration.WithLabelValues(string(rc.Outcome), string(rc.Reason)).Observe(d.Seconds())
}

// sandboxFailure counts a sandbox that failed or was not proven.
func (m *Metrics) sandboxFailure() {
	if m == nil {
		return
	}
	m.sandboxFailures.Inc()
}
