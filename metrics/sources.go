package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookroom/hookroom/hooks"
)

var (
	hookLabels   = []string{"event", "plugin", "hook"}
	hookRuns     = prometheus.NewDesc("hookroom_hook_runs_total", "Hook runs, whatever their outcome.", hookLabels, nil)
	hookErrors   = prometheus.NewDesc("hookroom_hook_errors_total", "Hook runs that returned an error.", hookLabels, nil)
	hookTimeouts = prometheus.NewDesc("hookroom_hook_timeouts_total", "Hook runs that passed their deadline.", hookLabels, nil)
	hookAbandon  = prometheus.NewDesc("hookroom_hook_abandoned_total", "Timed-out hook runs the emission gave up on before they returned.", hookLabels, nil)
	hookPanics   = prometheus.NewDesc("hookroom_hook_panics_total", "Hook runs that panicked.", hookLabels, nil)
	hookDuration = prometheus.NewDesc("hookroom_hook_duration_seconds", "Hook run time (an abandoned run counts until it was abandoned).", hookLabels, nil)

	inboxBacklog = prometheus.NewDesc("hookroom_inbox_backlog", "Inbound events recorded in the inbox and not handled yet.", nil, nil)

	pluginState    = prometheus.NewDesc("hookroom_plugin_process_state", "1 for the state each process plugin is in (running, restarting, disabled, closed), 0 for the others.", []string{"plugin", "state"}, nil)
	pluginRestarts = prometheus.NewDesc("hookroom_plugin_process_restarts_total", "Restarts of a process plugin after a crash, since it was loaded.", []string{"plugin"}, nil)
)

// hookBuckets are hooks.LatencyBuckets in seconds.
var hookBuckets = func() []float64 {
	out := make([]float64, len(hooks.LatencyBuckets))
	for i, b := range hooks.LatencyBuckets {
		out[i] = b.Seconds()
	}
	return out
}()

// sourceCollector reads Sources at scrape time.
type sourceCollector struct{ src Sources }

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hookRuns, hookErrors, hookTimeouts, hookAbandon, hookPanics, hookDuration, inboxBacklog, pluginState, pluginRestarts} {
		ch <- d
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	if c.src.Hooks != nil {
		collectHooks(ch, c.src.Hooks())
	}
	if c.src.InboxBacklog != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := c.src.InboxBacklog(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(inboxBacklog, err)
		} else {
			ch <- prometheus.MustNewConstMetric(inboxBacklog, prometheus.GaugeValue, float64(n))
		}
	}
	if c.src.Plugins != nil {
		for _, p := range c.src.Plugins() {
			for _, s := range PluginStates {
				v := 0.0
				if s == p.State {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(pluginState, prometheus.GaugeValue, v, p.Name, s)
			}
			ch <- prometheus.MustNewConstMetric(pluginRestarts, prometheus.CounterValue, float64(p.Restarts), p.Name)
		}
	}
}

func collectHooks(ch chan<- prometheus.Metric, stats []hooks.HookStats) {
	// The same hook may be listed twice (never, today; but a duplicate
	// series would fail the whole scrape), so keep the first.
	seen := make(map[[3]string]bool, len(stats))
	for _, s := range stats {
		key := [3]string{s.Event, s.Plugin, s.Hook}
		if seen[key] {
			continue
		}
		seen[key] = true
		l := key[:]
		ch <- prometheus.MustNewConstMetric(hookRuns, prometheus.CounterValue, float64(s.Invocations), l...)
		ch <- prometheus.MustNewConstMetric(hookErrors, prometheus.CounterValue, float64(s.Errors), l...)
		ch <- prometheus.MustNewConstMetric(hookTimeouts, prometheus.CounterValue, float64(s.Timeouts), l...)
		ch <- prometheus.MustNewConstMetric(hookAbandon, prometheus.CounterValue, float64(s.Abandoned), l...)
		ch <- prometheus.MustNewConstMetric(hookPanics, prometheus.CounterValue, float64(s.Panics), l...)
		// A const histogram keeps the map it is given until it is written
		// out: one map per hook.
		buckets := make(map[float64]uint64, len(hookBuckets))
		count := s.Invocations
		for i, n := range s.Buckets {
			if i < len(hookBuckets) {
				buckets[hookBuckets[i]] = n
				count = max(count, n) // the counters are read one by one
			}
		}
		ch <- prometheus.MustNewConstHistogram(hookDuration, count, s.Total.Seconds(), buckets, l...)
	}
}
