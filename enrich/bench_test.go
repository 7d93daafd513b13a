package enrich

import (
	"fmt"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// benchItems returns n items shaped like real enrichment: short keys, a
// sentence or two of text with the odd character to escape, a mix of
// policies, every third item transient.
func benchItems(n int) []hooks.EnrichmentItem {
	texts := []string{
		"User is at Home (San Francisco), 2.1 km from the office; stationary since 08:12.",
		"Current weather: 18C, partly cloudy, wind 12 km/h W. Rain expected after 16:00.",
		`Next meeting: 10:00 "Stand-up" with the backend team <room 4.12> & guests.`,
		"Thread goal: ship the release notes for v0.3 before Friday.",
		"User's timezone: Europe/Berlin (UTC+02:00); prefers metric units.",
	}
	items := make([]hooks.EnrichmentItem, n)
	for i := range items {
		items[i] = hooks.EnrichmentItem{
			Key:       fmt.Sprintf("item_%02d", (i*7)%n),
			Text:      texts[i%len(texts)],
			Transient: i%3 == 2,
		}
		if i%2 == 0 {
			items[i].CachePolicy = hooks.Stable
		} else {
			items[i].CachePolicy = hooks.Volatile
		}
	}
	return items
}

func BenchmarkRenderMessage(b *testing.B) {
	items := benchItems(10)
	b.ReportAllocs()
	b.SetBytes(int64(len(RenderMessage(items))))
	for b.Loop() {
		_ = RenderMessage(items)
	}
}

func BenchmarkRenderSystem(b *testing.B) {
	items := benchItems(10)
	b.ReportAllocs()
	b.SetBytes(int64(len(RenderSystem(items))))
	for b.Loop() {
		_ = RenderSystem(items)
	}
}

func BenchmarkRenderTransient(b *testing.B) {
	parts := []string{RenderMessage(benchItems(3)), "", "Relevant memories:\n- likes tea"}
	b.ReportAllocs()
	for b.Loop() {
		_ = RenderTransient(parts...)
	}
}

// BenchmarkBuild is one typical turn: 10 message items (some transient), 4
// system items and one runtime-rendered transient part.
func BenchmarkBuild(b *testing.B) {
	message, system := benchItems(10), benchItems(4)
	user := "What should I wear today? I have a meeting at 10 and might cycle there.\n"
	extra := `<matrix_message_target room="!r:example.org" thread="$root"/>`
	b.ReportAllocs()
	for b.Loop() {
		_ = Build(user, message, system, extra)
	}
}
