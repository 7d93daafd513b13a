package bot

import (
	"fmt"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
)

// buildModels turns config.yaml's models into agents.Model values, by name.
func buildModels(cfg *config.Config) (map[string]agents.Model, map[string]agents.ModelSpec, error) {
	models := make(map[string]agents.Model, len(cfg.Models))
	specs := make(map[string]agents.ModelSpec, len(cfg.Models))
	for name, m := range cfg.Models {
		spec := agents.ModelSpec{
			Provider: string(m.Provider), BaseURL: m.BaseURL, APIKey: m.APIKey.Reveal(),
			Model: m.Model, MaxTokens: m.MaxTokens, ContextWindow: m.ContextWindow, Vision: m.Vision,
		}.WithDefaults()
		model, err := agents.NewModel(spec)
		if err != nil {
			return nil, nil, fmt.Errorf("failed to set up model %s (%s:%d): %w", name, cfg.Path, cfg.Line("models."+name), err)
		}
		models[name] = model
		specs[name] = spec
	}
	return models, specs, nil
}
