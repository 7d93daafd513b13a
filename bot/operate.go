package bot

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/admin"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/buildinfo"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/plugins"
)

// This file wires hookroom's operations surface: the metrics, the HTTP
// listener (health, readiness, /metrics, the admin API) and the points
// where a turn reports its stages.

// operations is the Bot's part that the HTTP listener and the metrics use.
type operations struct {
	metrics *metrics.Metrics
	http    atomic.Pointer[admin.Server] // set by Run when http.listen is set
	// running is set once every account runs its sync loop, until the
	// shutdown begins; stopping from then on.
	running, stopping atomic.Bool
	// reloads are the last reloads, for the console's overview.
	reloads reloadLog
}

// newMetrics creates the metrics of b; the scrape-time sources read the
// registry, the inbox and the plugins in service.
func (b *Bot) newMetrics() *metrics.Metrics {
	return metrics.New(metrics.Sources{
		Hooks: func() []hooks.HookStats {
			if reg := b.w().reg; reg != nil {
				return reg.Stats()
			}
			return nil
		},
		InboxBacklog: func(ctx context.Context) (int, error) { return b.track.Backlog(ctx) },
		Plugins: func() []metrics.PluginStatus {
			var out []metrics.PluginStatus
			for _, p := range b.pluginInfos() {
				if p.Process != nil {
					out = append(out, metrics.PluginStatus{Name: p.Name, State: p.Process.State, Restarts: p.Process.Restarts})
				}
			}
			return out
		},
		Build: metricsBuild(),
	})
}

// metricsBuild is this build as hookroom_build_info reports it: the same
// version hookroom version prints ("dev" for a source build).
func metricsBuild() metrics.BuildInfo {
	bi := buildinfo.Read()
	return metrics.BuildInfo{Version: bi.Version, Revision: bi.Revision, GoVersion: bi.GoVersion}
}

// Metrics returns the server's metrics.
func (b *Bot) Metrics() *metrics.Metrics { return b.ops.metrics }

// retryObserver counts the homeserver request retries.
type retryObserver struct{ m *metrics.Metrics }

func (o retryObserver) Retrying(_ context.Context, r matrixio.Retry) {
	o.m.Retry(r.Request, r.RateLimited, r.Wait)
}

// startHTTP starts the HTTP listener when http.listen is set. It runs
// before the accounts log in, so /healthz and /readyz answer during the
// start-up.
func (b *Bot) startHTTP(ctx context.Context) error {
	addr := b.w().cfg.HTTP.Address()
	if addr == "" {
		return nil
	}
	srv, err := admin.Listen(ctx, addr, admin.Options{
		Backend: adminBackend{b},
		Metrics: b.ops.metrics.Handler(),
		Token:   func() string { return b.w().cfg.HTTP.AdminToken.Reveal() },
		Console: b.consoleHandler(),
	})
	if err != nil {
		return err
	}
	b.ops.http.Store(srv)
	return nil
}

// stopHTTP ends the listener, letting requests in flight finish briefly.
func (b *Bot) stopHTTP() {
	srv := b.ops.http.Load()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
}

// HTTPAddr returns the address the HTTP listener is bound to, or "" when
// none runs (tests listen on port 0).
func (b *Bot) HTTPAddr() string {
	srv := b.ops.http.Load()
	if srv == nil {
		return ""
	}
	return srv.Addr().String()
}

// adminBackend answers the HTTP listener from the running bot.
type adminBackend struct{ b *Bot }

var _ admin.Backend = adminBackend{}

func (a adminBackend) Ready(ctx context.Context) []string {
	b := a.b
	var reasons []string
	if err := b.db.RawDB.PingContext(ctx); err != nil {
		reasons = append(reasons, "database: "+errorText(err))
	}
	if b.db.Standby() {
		return append(reasons, "standby: another hookroom holds the database; this one takes over when it stops")
	}
	if b.w().reg == nil {
		reasons = append(reasons, "plugins: not loaded yet")
	}
	for _, p := range b.pluginInfos() {
		if p.Process != nil && p.Process.State != "running" && p.Process.State != "restarting" {
			reasons = append(reasons, fmt.Sprintf("plugin %s: %s", p.Name, p.Process.State))
		}
	}
	if b.ops.stopping.Load() {
		return append(reasons, "shutting down")
	}
	if !b.ops.running.Load() {
		return append(reasons, "accounts: starting (logging in, provisioning rooms)")
	}
	b.readyMu.Lock()
	defer b.readyMu.Unlock()
	for _, e := range b.entities(b.w()) {
		if !b.ready[e.account.UserID()] {
			reasons = append(reasons, fmt.Sprintf("account %s: first sync not caught up yet", e.account.UserID()))
		}
	}
	return reasons
}

// errorText is err's message, kept short for a readiness reason (driver
// errors do not carry the database URI).
func errorText(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

func (a adminBackend) Hooks() []hooks.HookInfo { return a.b.Registry().Hooks() }

func (a adminBackend) Agents() []admin.Agent {
	b := a.b
	if !b.ops.running.Load() || b.router == nil {
		return []admin.Agent{}
	}
	b.readyMu.Lock()
	ready := make(map[id.UserID]bool, len(b.ready))
	for k, v := range b.ready {
		ready[k] = v
	}
	b.readyMu.Unlock()
	var out []admin.Agent
	w := b.w()
	for _, e := range b.entities(w) {
		ag := admin.Agent{Name: string(e.name), Router: e.router, UserID: e.account.UserID().String(), Rooms: []string{}, State: admin.AgentStarting}
		if ready[e.account.UserID()] {
			ag.State = admin.AgentReady
		}
		for _, r := range b.joinedRooms(w, e) {
			ag.Rooms = append(ag.Rooms, r.String())
		}
		if !e.router {
			ag.Model = w.providerModel(e.name)
		}
		out = append(out, ag)
	}
	return out
}

// pluginInfos describes the plugins in service (none when tests replaced
// plugin loading).
func (b *Bot) pluginInfos() []plugins.Info {
	if set := b.w().plugins; set != nil {
		return set.Plugins()
	}
	return nil
}

func (a adminBackend) Plugins() []admin.Plugin {
	out := []admin.Plugin{}
	for _, p := range a.b.pluginInfos() {
		ap := admin.Plugin{Name: p.Name, Kind: string(p.Kind), Source: p.Source, State: "loaded", Hooks: p.Hooks, Tools: p.Tools}
		if p.Process != nil {
			ap.State, ap.Restarts, ap.PID = p.Process.State, p.Process.Restarts, p.Process.PID
		}
		out = append(out, ap)
	}
	return out
}

// reloadReportJSON is a ReloadReport as the admin API shows it.
type reloadReportJSON struct {
	Changes      config.Changes `json:"changes"`
	Plugins      []string       `json:"plugins"`
	NeedsRestart []string       `json:"needs_restart"`
	TookMS       float64        `json:"took_ms"`
}

func (a adminBackend) Reload(ctx context.Context) admin.ReloadResult {
	ctx = a.b.log.WithContext(ctx)
	rep, err := a.b.Reload(context.WithoutCancel(ctx), false)
	if err != nil {
		logErrors(zerolog.Ctx(ctx), zerolog.ErrorLevel, err, "configuration not reloaded (admin API); the running one stays in service")
		res := admin.ReloadResult{}
		for _, e := range splitErrors(err) {
			res.Errors = append(res.Errors, e.Error())
		}
		return res
	}
	return admin.ReloadResult{OK: true, Summary: rep.Summary(), Report: reloadReportJSON{
		Changes: rep.Config, Plugins: nonNil(rep.Plugins), NeedsRestart: nonNil(rep.NeedsRestart),
		TookMS: float64(rep.Took.Microseconds()) / 1000,
	}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}

// Reload reads config.yaml again and applies it (see reload) and counts
// the reload in the metrics.
func (b *Bot) Reload(ctx context.Context, force bool) (ReloadReport, error) {
	rep, err := b.reload(ctx, force)
	entry := console.Reload{At: time.Now(), OK: err == nil}
	if err != nil {
		b.ops.metrics.Reload(metrics.ReloadFailed)
		for _, e := range splitErrors(err) {
			entry.Errors = append(entry.Errors, e.Error())
		}
	} else {
		b.ops.metrics.Reload(metrics.ReloadOK)
		entry.Summary = rep.Summary()
	}
	b.ops.reloads.add(entry)
	return rep, err
}
