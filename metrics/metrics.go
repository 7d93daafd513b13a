package metrics

import (
	"context"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hookroom/hookroom/hooks"
)

// Stage is a point of a turn whose latency is measured from the moment its
// message arrived in the inbox.
type Stage string

const (
	// StageRouted: the message was routed to an agent (its turn starts).
	StageRouted Stage = "routed"
	// StageFirstToken: the model streamed the first piece of text.
	StageFirstToken Stage = "first_token"
	// StageFirstVisible: the first real text was visible in the room.
	StageFirstVisible Stage = "first_visible"
	// StageFinal: the complete answer was delivered.
	StageFinal Stage = "final"
)

// Stages lists every Stage, in turn order.
var Stages = []Stage{StageRouted, StageFirstToken, StageFirstVisible, StageFinal}

// Reload results.
const (
	ReloadOK     = "ok"
	ReloadFailed = "failed"
)

// PluginStatus is a process plugin's supervision state, read at scrape time.
type PluginStatus struct {
	Name string
	// State is the process state ("running", "restarting", "disabled",
	// "closed").
	State    string
	Restarts int
}

// PluginStates are the states every process plugin reports a 0/1 gauge
// for, so that a state change is visible as a series changing value.
var PluginStates = []string{"running", "restarting", "disabled", "closed"}

// Sources are read at scrape time. A nil function contributes nothing.
type Sources struct {
	// Hooks returns the run statistics of the hooks in service.
	Hooks func() []hooks.HookStats
	// InboxBacklog counts the inbound events recorded but not handled yet.
	InboxBacklog func(ctx context.Context) (int, error)
	// Plugins returns the state of every process plugin.
	Plugins func() []PluginStatus
	// Build names this build (version, VCS revision); zero fields are read
	// from the binary's build info.
	Build BuildInfo
}

// BuildInfo is what hookroom_build_info reports.
type BuildInfo struct {
	Version, Revision, GoVersion string
}

// Metrics holds hookroom's metrics and the registry they are exposed from.
type Metrics struct {
	reg *prometheus.Registry

	turnStage     *prometheus.HistogramVec
	turns         *prometheus.CounterVec
	modelRequests *prometheus.CounterVec
	modelErrors   *prometheus.CounterVec
	inputTokens   *prometheus.CounterVec
	outputTokens  *prometheus.CounterVec
	cachedTokens  *prometheus.CounterVec
	inboxReplays  prometheus.Counter
	retries       *prometheus.CounterVec
	rateLimited   *prometheus.CounterVec
	rateLimitWait prometheus.Counter
	reloads       *prometheus.CounterVec
	authz         *prometheus.CounterVec
	limited       *prometheus.CounterVec
}

// TurnBuckets are the bounds of the turn stage histogram, in seconds:
// routing takes milliseconds, a final answer up to minutes.
var TurnBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// New creates the metrics and registers them, with the collectors that read
// src at scrape time and Go runtime and process metrics.
func New(src Sources) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	agentModel := []string{"agent", "model"}
	m.turnStage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookroom_turn_stage_seconds",
		Help:    "Time from a message's arrival in the inbox to each stage of the turn answering it (routed, first_token, first_visible, final).",
		Buckets: TurnBuckets,
	}, []string{"stage"})
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_turns_total",
		Help: "Turns that ended, by outcome: responded, or the message:cancelled reason.",
	}, []string{"outcome"})
	m.modelRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_model_requests_total", Help: "Model requests (streamed completions), per agent and model.",
	}, agentModel)
	m.modelErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_model_errors_total", Help: "Model requests that failed, per agent and model.",
	}, agentModel)
	m.inputTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_model_input_tokens_total", Help: "Input (prompt) tokens the provider reported, per agent and model.",
	}, agentModel)
	m.outputTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_model_output_tokens_total", Help: "Output (completion) tokens the provider reported, per agent and model.",
	}, agentModel)
	m.cachedTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_model_cached_tokens_total", Help: "The part of the input tokens the provider served from its prompt cache, per agent and model.",
	}, agentModel)
	m.inboxReplays = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookroom_inbox_replayed_total", Help: "Inbound events left unhandled by the previous run and replayed at start-up.",
	})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_matrix_request_retries_total", Help: "Homeserver requests retried after a rate limit, server or network error, per request.",
	}, []string{"request"})
	m.rateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_matrix_rate_limited_total", Help: "Homeserver requests rate-limited (M_LIMIT_EXCEEDED or 429) and retried, per request.",
	}, []string{"request"})
	m.rateLimitWait = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hookroom_matrix_rate_limit_wait_seconds_total", Help: "Time spent waiting before retrying rate-limited homeserver requests.",
	})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_reloads_total", Help: "Configuration reloads, by result (ok, failed).",
	}, []string{"result"})
	m.authz = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_authorization_decisions_total",
		Help: "Authorization decisions on routed messages, by result (allow, deny) and the reason of the rule that decided.",
	}, []string{"result", "reason"})
	m.limited = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookroom_messages_rate_limited_total",
		Help: "Messages not answered because a rate limit (rate_limits) refused them, by the scope of the limit (person, room).",
	}, []string{"scope"})
	for _, r := range []string{ReloadOK, ReloadFailed} {
		m.reloads.WithLabelValues(r)
	}
	for _, s := range Stages {
		m.turnStage.WithLabelValues(string(s))
	}
	m.reg.MustRegister(m.turnStage, m.turns, m.modelRequests, m.modelErrors, m.inputTokens,
		m.outputTokens, m.cachedTokens, m.inboxReplays, m.retries, m.rateLimited, m.rateLimitWait, m.reloads,
		m.authz, m.limited,
		&sourceCollector{src: src}, buildInfo(src.Build),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the metrics are exposed from (tests gather
// it directly).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus exposition format. Scrapes
// run one at a time; a failing source is logged by the handler's error log
// and the rest is still served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: 2,
		Timeout:             10 * time.Second,
	})
}

// TurnStage records that a turn reached stage d after its message arrived.
func (m *Metrics) TurnStage(stage Stage, d time.Duration) {
	if m == nil {
		return
	}
	m.turnStage.WithLabelValues(string(stage)).Observe(d.Seconds())
}

// TurnEnded counts a turn that ended with outcome ("responded", or a
// message:cancelled reason).
func (m *Metrics) TurnEnded(outcome string) {
	if m == nil {
		return
	}
	m.turns.WithLabelValues(outcome).Inc()
}

// ModelRequest counts one model request of agent to model, and whether it
// failed.
func (m *Metrics) ModelRequest(agent, model string, failed bool) {
	if m == nil {
		return
	}
	m.modelRequests.WithLabelValues(agent, model).Inc()
	errs := m.modelErrors.WithLabelValues(agent, model) // the series exists from the first request
	if failed {
		errs.Inc()
	}
}

// Tokens adds the tokens one model request reported.
func (m *Metrics) Tokens(agent, model string, input, output, cached int) {
	if m == nil {
		return
	}
	m.inputTokens.WithLabelValues(agent, model).Add(float64(max(input, 0)))
	m.outputTokens.WithLabelValues(agent, model).Add(float64(max(output, 0)))
	m.cachedTokens.WithLabelValues(agent, model).Add(float64(max(cached, 0)))
}

// Replayed counts n events replayed from the inbox at start-up.
func (m *Metrics) Replayed(n int) {
	if m == nil {
		return
	}
	m.inboxReplays.Add(float64(n))
}

// Retry counts a retried homeserver request and, when it was rate limited,
// the wait before the retry.
func (m *Metrics) Retry(request string, rateLimited bool, wait time.Duration) {
	if m == nil {
		return
	}
	m.retries.WithLabelValues(request).Inc()
	if rateLimited {
		m.rateLimited.WithLabelValues(request).Inc()
		m.rateLimitWait.Add(wait.Seconds())
	}
}

// Reload counts a configuration reload with its result (ReloadOK or
// ReloadFailed).
func (m *Metrics) Reload(result string) {
	if m == nil {
		return
	}
	m.reloads.WithLabelValues(result).Inc()
}

// Authorization counts an authorization decision on a routed message.
func (m *Metrics) Authorization(allow bool, reason string) {
	if m == nil {
		return
	}
	result := "deny"
	if allow {
		result = "allow"
	}
	m.authz.WithLabelValues(result, reason).Inc()
}

// RateLimited counts a message a rate limit refused, by the limit's scope
// (person or room).
func (m *Metrics) RateLimited(scope string) {
	if m == nil {
		return
	}
	m.limited.WithLabelValues(scope).Inc()
}

// buildInfo is hookroom_build_info{version,revision,goversion} 1.
func buildInfo(b BuildInfo) prometheus.Collector {
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.GoVersion == "" {
			b.GoVersion = info.GoVersion
		}
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && b.Revision == "" {
				b.Revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "hookroom_build_info",
		Help:        "Always 1; the labels name the build: version, VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion},
	})
	g.Set(1)
	return g
}
