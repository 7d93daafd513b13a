package bot

import (
	"context"
	"errors"

	"github.com/hookroom/hookroom/hooks"
)

// loadPlugins builds the hook registry from config.yaml's plugins.
func (b *Bot) loadPlugins(context.Context) (*hooks.Registry, error) {
	if len(b.w().cfg.Plugins) > 0 {
		return nil, errors.New("failed to load plugins: plugin loading is not wired yet")
	}
	return hooks.NewRegistry(nil, b.registryOptions())
}

// registryOptions are the engine settings of config.yaml plus the host
// services.
func (b *Bot) registryOptions() hooks.Options {
	allow := map[hooks.AgentName][]string{}
	for name, a := range b.w().cfg.Agents {
		if a.Plugins != nil {
			allow[hooks.AgentName(name)] = a.Plugins
		}
	}
	return hooks.Options{
		Services:             b.services.bind(),
		CollectorConcurrency: b.w().cfg.Hooks.CollectorConcurrency,
		MaxDepth:             b.w().cfg.Hooks.MaxDepth,
		Allowlist:            allow,
		Previous:             b.live.Load(),
	}
}
