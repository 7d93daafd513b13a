package installer_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins/installer"
)

// HookGate backs the installer's gate with plugin:before_install hooks: a
// policy hook refuses one plugin, a failing closed hook refuses all.
func TestHookGate(t *testing.T) {
	policy := hooks.Handle(hooks.PluginBeforeInstall, "allowlist", func(_ context.Context, c *hooks.PluginInstallContext) error {
		if c.Name != "geo" {
			c.Decline(c.Name + " is not on the allowlist")
		}
		return nil
	})
	broken := hooks.Handle(hooks.PluginBeforeInstall, "broken", func(context.Context, *hooks.PluginInstallContext) error {
		return errors.New("policy store down")
	}, hooks.WithFailurePolicy(hooks.FailClosed))

	tests := []struct {
		name  string
		hooks []hooks.Hook
		plug  string
		want  string // "" allowed
	}{
		{"no hooks", nil, "weather", ""},
		{"allowed", []hooks.Hook{policy}, "geo", ""},
		{"declined", []hooks.Hook{policy}, "weather", "refused by the install gate (plugin:before_install): weather is not on the allowlist"},
		{"closed failure", []hooks.Hook{broken}, "geo", "gate test/broken was unavailable (failed), so the install was declined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			gate := installer.HookGate(hooktest.NewRegistry(t, tc.hooks...))
			in := newInstaller(t, nil, func(o *installer.Options) { o.Gate = gate })
			_, err := in.Install(t.Context(), pluginDir(t, tc.plug, "1.0.0"))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, installer.ErrDeclined) || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
	t.Run("nil registry", func(t *testing.T) {
		if ok, _, err := installer.HookGate(nil)(t.Context(), hooks.PluginInstallContext{Name: "x"}); !ok || err != nil {
			t.Errorf("ok=%v err=%v", ok, err)
		}
	})
}
