package python_test

import (
	"context"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// BenchmarkHookRoundTrip measures one message:before_response emission with
// the Python test plugin's single "footer" hook, reporting the median and
// the 99th percentile. Compare with plugins/sdk's BenchmarkHookRoundTrip
// (in-process and Go SDK).
func BenchmarkHookRoundTrip(b *testing.B) {
	b.Run("python-sdk-process", func(b *testing.B) {
		p, err := process.Start(context.Background(), spec(b, "ok"))
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "py-test", Hooks: sdktest.Only(b, p.Hooks(), "footer")}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sdktest.BenchEmit(b, reg, "Hello\n-- sent by hookroom")
	})
}
