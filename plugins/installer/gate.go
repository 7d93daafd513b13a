package installer

import (
	"context"
	"fmt"

	"github.com/hookroom/hookroom/hooks"
)

// HookGate returns a Gate that emits plugin:before_install on reg: the
// install is allowed unless a hook declines it (a hook with failure
// policy closed that fails declines it too). An emission that fails as a
// whole (ctx ended, the recursion limit) is an error, which refuses the
// install. A nil reg allows everything.
func HookGate(reg *hooks.Registry) Gate {
	return func(ctx context.Context, c hooks.PluginInstallContext) (bool, string, error) {
		if err := hooks.Emit(ctx, reg, hooks.PluginBeforeInstall, &c); err != nil {
			return false, "", fmt.Errorf("failed to run the plugin:before_install hooks: %w", err)
		}
		if c.Declined {
			return false, c.DeclineReason, nil
		}
		return true, "", nil
	}
}
