package enrich_test

import (
	"fmt"

	"github.com/hookroom/hookroom/enrich"
	"github.com/hookroom/hookroom/hooks"
)

// Build splits what the enrich hooks collected into the stored prompt, the
// transient message sent just before it, and the system-prompt addition.
func ExampleBuild() {
	message := []hooks.EnrichmentItem{
		{Key: "location", Text: "User is at Home (San Francisco)", CachePolicy: hooks.Stable},
		{Key: "weather", Text: "18C & cloudy", Transient: true},
		{Key: "matrix_message_target", Text: "reserved: dropped"},
	}
	system := []hooks.EnrichmentItem{
		{Key: "active_focus", Text: "Triage first."},
		{Key: "room_tags", Text: "backend, urgent", CachePolicy: hooks.Stable},
	}
	turn := enrich.Build("What should I wear today?\n", message, system)

	fmt.Println(turn.Prompt)
	fmt.Println("--")
	fmt.Println(turn.Transient)
	fmt.Println("--")
	fmt.Println(turn.System)
	// Output:
	// What should I wear today?
	//
	// <hookroom_message_context>
	// <item key="location" cache_policy="stable">
	// User is at Home (San Francisco)
	// </item>
	// </hookroom_message_context>
	// --
	// <hookroom_transient_context>
	// <hookroom_message_context>
	// <item key="weather" cache_policy="volatile">
	// 18C &amp; cloudy
	// </item>
	// </hookroom_message_context>
	// </hookroom_transient_context>
	// --
	// <hookroom_system_context>
	// <item key="room_tags" cache_policy="stable">
	// backend, urgent
	// </item>
	// <item key="active_focus" cache_policy="volatile">
	// Triage first.
	// </item>
	// </hookroom_system_context>
}

func ExampleRenderMessage() {
	fmt.Println(enrich.RenderMessage([]hooks.EnrichmentItem{
		{Key: "quote", Text: `She said "it's <fine>"`},
	}))
	// Output:
	// <hookroom_message_context>
	// <item key="quote" cache_policy="volatile">
	// She said &quot;it&#x27;s &lt;fine&gt;&quot;
	// </item>
	// </hookroom_message_context>
}
