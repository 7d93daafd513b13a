package sdk_test

import (
	"context"
	"os"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/plugins/sdk/sdktest"
)

// BenchmarkHookRoundTrip measures one message:before_response emission with
// the test plugin's single "footer" hook: built in, and as a process speaking
// the protocol through this SDK. It reports the median and the 99th
// percentile of the individual emissions next to ns/op.
func BenchmarkHookRoundTrip(b *testing.B) {
	settings, err := hooks.NewSettings(testSettings)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("in-process", func(b *testing.B) {
		inst, err := testPlugin.Builtin().New(context.Background(), plugins.Env{Name: "sdk-test", Settings: settings})
		if err != nil {
			b.Fatal(err)
		}
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "sdk-test", Hooks: sdktest.Only(b, inst.Hooks(), "footer"), Settings: settings}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sdktest.BenchEmit(b, reg, "Hello\n-- sent by hookroom")
	})
	b.Run("go-sdk-process", func(b *testing.B) {
		exe, err := os.Executable()
		if err != nil {
			b.Fatal(err)
		}
		p, err := process.Start(context.Background(), process.Spec{
			Name: "sdk-test", Command: []string{exe}, Env: benchEnv(),
			StateDir: b.TempDir(), Settings: settings,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "sdk-test", Hooks: sdktest.Only(b, p.Hooks(), "footer"), Settings: settings}}, hooks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		sdktest.BenchEmit(b, reg, "Hello\n-- sent by hookroom")
	})
}

// benchEnv is the plugin's environment; HOOKROOM_BENCH_CHILD_GOMAXPROCS
// passes GOMAXPROCS on to it, to compare scheduler settings.
func benchEnv() []string {
	env := []string{"HOOKROOM_SDK_TEST=1"}
	if v := os.Getenv("HOOKROOM_BENCH_CHILD_GOMAXPROCS"); v != "" {
		env = append(env, "GOMAXPROCS="+v)
	}
	return env
}
