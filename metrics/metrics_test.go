package metrics_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/metrics/metricstest"
)

// scrape serves m's handler once and parses what it wrote.
func scrape(t *testing.T, m *metrics.Metrics) metricstest.Families {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("GET /metrics = %d: %s", rec.Code, rec.Body)
	}
	fams, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func TestExposition(t *testing.T) {
	reg := hooktest.NewRegistry(t,
		hooks.Handle(hooks.MessageReceived, "ok", func(context.Context, *hooks.MessageReceivedContext) error { return nil }),
		hooks.Handle(hooks.MessageReceived, "fails", func(context.Context, *hooks.MessageReceivedContext) error { return errors.New("no") }),
	)
	for range 3 {
		hooktest.Emit(t, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	}
	m := metrics.New(metrics.Sources{
		Hooks:        reg.Stats,
		InboxBacklog: func(context.Context) (int, error) { return 7, nil },
		Plugins: func() []metrics.PluginStatus {
			return []metrics.PluginStatus{{Name: "geo", State: "restarting", Restarts: 2}}
		},
		Build: metrics.BuildInfo{Version: "v1.2.3", Revision: "abc"},
	})
	m.TurnStage(metrics.StageRouted, 20*time.Millisecond)
	m.TurnStage(metrics.StageFinal, 2*time.Second)
	m.TurnEnded("responded")
	m.ModelRequest("helper", "gpt", false)
	m.ModelRequest("helper", "gpt", true)
	m.Tokens("helper", "gpt", 100, 20, 64)
	m.Retry("send m.room.message", true, 1500*time.Millisecond)
	m.Retry("join", false, time.Second)
	m.Reload(metrics.ReloadFailed)
	m.Replayed(4)
	var nilMetrics *metrics.Metrics
	nilMetrics.TurnEnded("responded") // no panic: metrics are optional

	f := scrape(t, m)
	plugin := func(l metricstest.Labels) metricstest.Labels {
		l["plugin"] = "test"
		return l
	}
	tests := []struct {
		name   string
		labels metricstest.Labels
		want   float64
	}{
		{"hookroom_hook_runs_total", plugin(metricstest.Labels{"event": "message:received", "hook": "ok"}), 3},
		{"hookroom_hook_errors_total", plugin(metricstest.Labels{"hook": "fails"}), 3},
		{"hookroom_hook_errors_total", plugin(metricstest.Labels{"hook": "ok"}), 0},
		{"hookroom_hook_timeouts_total", plugin(metricstest.Labels{"hook": "ok"}), 0},
		{"hookroom_hook_abandoned_total", plugin(metricstest.Labels{"hook": "ok"}), 0},
		{"hookroom_hook_panics_total", plugin(metricstest.Labels{"hook": "ok"}), 0},
		{"hookroom_hook_duration_seconds", plugin(metricstest.Labels{"hook": "ok"}), 3},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "routed"}, 1},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "first_token"}, 0},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "final"}, 1},
		{"hookroom_turns_total", metricstest.Labels{"outcome": "responded"}, 1},
		{"hookroom_model_requests_total", metricstest.Labels{"agent": "helper", "model": "gpt"}, 2},
		{"hookroom_model_errors_total", metricstest.Labels{"agent": "helper", "model": "gpt"}, 1},
		{"hookroom_model_input_tokens_total", metricstest.Labels{"agent": "helper", "model": "gpt"}, 100},
		{"hookroom_model_output_tokens_total", metricstest.Labels{"agent": "helper", "model": "gpt"}, 20},
		{"hookroom_model_cached_tokens_total", metricstest.Labels{"agent": "helper", "model": "gpt"}, 64},
		{"hookroom_matrix_request_retries_total", metricstest.Labels{"request": "send m.room.message"}, 1},
		{"hookroom_matrix_request_retries_total", metricstest.Labels{"request": "join"}, 1},
		{"hookroom_matrix_rate_limited_total", metricstest.Labels{"request": "send m.room.message"}, 1},
		{"hookroom_matrix_rate_limit_wait_seconds_total", nil, 1.5},
		{"hookroom_reloads_total", metricstest.Labels{"result": "ok"}, 0},
		{"hookroom_reloads_total", metricstest.Labels{"result": "failed"}, 1},
		{"hookroom_inbox_replayed_total", nil, 4},
		{"hookroom_inbox_backlog", nil, 7},
		{"hookroom_plugin_process_state", metricstest.Labels{"plugin": "geo", "state": "restarting"}, 1},
		{"hookroom_plugin_process_state", metricstest.Labels{"plugin": "geo", "state": "running"}, 0},
		{"hookroom_plugin_process_restarts_total", metricstest.Labels{"plugin": "geo"}, 2},
		{"hookroom_build_info", metricstest.Labels{"version": "v1.2.3", "revision": "abc"}, 1},
	}
	for _, tt := range tests {
		got, ok, err := f.Value(tt.name, tt.labels)
		if err != nil || !ok || got != tt.want {
			t.Errorf("%s%v = %v (found %v, %v), want %v; hookroom families: %v", tt.name, tt.labels, got, ok, err, tt.want, f.Names("hookroom_"))
		}
	}
	// The hook histogram's buckets are cumulative and end with every run.
	h := f.Series("hookroom_hook_duration_seconds", plugin(metricstest.Labels{"hook": "ok"}))[0].GetHistogram()
	b := h.GetBucket()
	if len(b) != len(hooks.LatencyBuckets)+1 || b[len(b)-1].GetCumulativeCount() != 3 { // +Inf included
		t.Errorf("hook duration buckets = %v, want %d ending at 3", b, len(hooks.LatencyBuckets)+1)
	}
	if _, ok := f["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}
}

// A source that fails does not take the other metrics down with it.
func TestFailingSource(t *testing.T) {
	m := metrics.New(metrics.Sources{InboxBacklog: func(context.Context) (int, error) { return 0, errors.New("database is gone") }})
	m.TurnEnded("responded")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	f, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := f.Value("hookroom_turns_total", metricstest.Labels{"outcome": "responded"}); !ok || v != 1 {
		t.Errorf("turns = %v, %v with a failing backlog source; want 1", v, ok)
	}
	if _, ok := f["hookroom_inbox_backlog"]; ok {
		t.Error("a backlog that could not be read is served")
	}
}
