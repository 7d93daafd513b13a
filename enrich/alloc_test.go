//go:build !race

package enrich

import (
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// TestAllocs pins the allocation budget: each rendered string is built in one
// allocation of the exact size, and ordering system items needs no heap
// memory for up to orderBufLen items. (Excluded under -race, which adds
// allocations of its own.)
func TestAllocs(t *testing.T) {
	message, system := benchItems(10), benchItems(orderBufLen)
	extra := []string{"Relevant memories:\n- likes tea"}
	tests := []struct {
		name string
		want float64
		fn   func()
	}{
		{name: "RenderMessage", want: 1, fn: func() { _ = RenderMessage(message) }},
		{name: "RenderSystem", want: 1, fn: func() { _ = RenderSystem(system) }},
		{name: "RenderTransient", want: 1, fn: func() { _ = RenderTransient("a", "", "b") }},
		{name: "RenderMessage empty", want: 0, fn: func() { _ = RenderMessage(nil) }},
		{name: "Build", want: 3, fn: func() { _ = Build("What should I wear?", message, system, extra...) }},
		{name: "Build nothing collected", want: 0, fn: func() { _ = Build("hi", nil, nil) }},
		{name: "Build only dropped items", want: 0, fn: func() {
			_ = Build("hi", []hooks.EnrichmentItem{{Key: KeyMatrixMessageTarget}}, []hooks.EnrichmentItem{{}})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := testing.AllocsPerRun(100, tt.fn); got != tt.want {
				t.Errorf("%s: %v allocations per run, want %v", tt.name, got, tt.want)
			}
		})
	}
}
