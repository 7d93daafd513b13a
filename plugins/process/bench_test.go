package process_test

import (
	"context"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// BenchmarkRoundTrip measures one message:before_response emission to the
// fake plugin's footer hook: the host's share of a round trip (the fake
// plugin speaks the protocol with the jsonrpc package and no SDK).
func BenchmarkRoundTrip(b *testing.B) {
	spec := process.Spec{Name: "bench", Command: []string{must(testExecutableB())}, Env: []string{"HOOKROOM_TEST_PLUGIN=ok"}, StateDir: b.TempDir()}
	p, err := process.Start(context.Background(), spec)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "bench", Hooks: sdktest.Only(b, p.Hooks(), "footer")}}, hooks.Options{})
	if err != nil {
		b.Fatal(err)
	}
	sdktest.BenchEmit(b, reg, "Hello\n-- footer")
}
