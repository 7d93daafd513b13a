package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/metrics"
)

// BenchmarkScrape is the cost of one /metrics scrape with 100 hooks in
// service (each with its histogram), ten agents' model series and every
// turn stage: the CPU time a Prometheus server spends of hookroom's.
//
//	go test -tags goolm -run XXX -bench Scrape ./metrics/
func BenchmarkScrape(b *testing.B) {
	var hs []hooks.Hook
	for i := range 100 {
		hs = append(hs, hooks.Handle(hooks.MessageReceived, fmt.Sprintf("h%d", i), func(context.Context, *hooks.MessageReceivedContext) error { return nil }))
	}
	reg := hooktest.NewRegistry(b, hs...)
	hooktest.Emit(b, reg, hooks.MessageReceived, hooktest.MessageReceived("hi"))
	m := metrics.New(metrics.Sources{Hooks: reg.Stats})
	for i := range 10 {
		m.ModelRequest(fmt.Sprintf("agent%d", i), "gpt", false)
		m.Tokens(fmt.Sprintf("agent%d", i), "gpt", 100, 10, 0)
	}
	h := m.Handler()
	var size int64
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		size, _ = io.Copy(io.Discard, rec.Body)
	}
	b.ReportMetric(float64(size), "bytes")
}
