// Package redact is an example plugin written with the Go SDK: it replaces
// API keys and access tokens in agent replies before they are sent
// (message:before_response) and before the final edit of a streamed reply
// (message:final_response_transform).
package redact

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/plugins/sdk"
)

// DefaultPatterns match common credential formats.
var DefaultPatterns = []string{
	`\bsk-[A-Za-z0-9_-]{20,}`,                 // OpenAI-style API keys
	`\bgh[pousr]_[A-Za-z0-9]{36,}`,            // GitHub tokens
	`\bAKIA[0-9A-Z]{16}\b`,                    // AWS access key ids
	`\bsyt_[A-Za-z0-9_]+_[A-Za-z0-9]+`,        // Matrix (Synapse) access tokens
	`\bxox[abprs]-[A-Za-z0-9-]{10,}`,          // Slack tokens
	`(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*`, // HTTP bearer credentials
}

// Settings are the plugin's settings in config.yaml.
type Settings struct {
	// Patterns are regular expressions (RE2) redacted besides DefaultPatterns.
	Patterns []string `json:"patterns"`
	// Replacement replaces each match (default "[redacted]").
	Replacement string `json:"replacement"`
}

// Plugin is the redact plugin: serve it with sdk.Main, or register
// Plugin.Builtin() to compile it in.
var Plugin = sdk.Plugin{
	Name:        "redact",
	Version:     "1.0.0",
	Description: "Redacts API keys and tokens from agent replies",
	Setup: func(_ context.Context, env plugins.Env) error {
		_, err := redactorFor(env.Settings)
		return err
	},
	Hooks: []hooks.Hook{
		hooks.Handle(hooks.MessageBeforeResponse, "redact_reply",
			func(_ context.Context, c *hooks.BeforeResponseContext) error {
				r, err := redactorFor(c.Settings())
				if err != nil {
					return err
				}
				c.Draft.Text = r.redact(c.Draft.Text)
				return nil
			}, hooks.Priority(1000)), // last: after every other transformer
		hooks.Handle(hooks.MessageFinalResponseTransform, "redact_final",
			func(_ context.Context, c *hooks.FinalResponseContext) error {
				r, err := redactorFor(c.Settings())
				if err != nil {
					return err
				}
				c.Draft.Text = r.redact(c.Draft.Text)
				return nil
			}, hooks.Priority(1000)),
	},
}

type redactor struct {
	re          *regexp.Regexp
	replacement string
}

func (r *redactor) redact(s string) string { return r.re.ReplaceAllLiteralString(s, r.replacement) }

// redactors caches one compiled redactor per distinct settings.
var redactors sync.Map // settings JSON → *redactor

func redactorFor(s hooks.Settings) (*redactor, error) {
	key := string(s.JSON())
	if r, ok := redactors.Load(key); ok {
		return r.(*redactor), nil
	}
	var set Settings
	if err := s.Decode(&set); err != nil {
		return nil, err
	}
	all := append(append([]string(nil), DefaultPatterns...), set.Patterns...)
	for _, p := range set.Patterns {
		if _, err := regexp.Compile(p); err != nil {
			return nil, fmt.Errorf("settings.patterns: %q: %w", p, err)
		}
	}
	re, err := regexp.Compile(strings.Join(all, "|"))
	if err != nil {
		return nil, fmt.Errorf("failed to compile patterns: %w", err)
	}
	r := &redactor{re: re, replacement: set.Replacement}
	if r.replacement == "" {
		r.replacement = "[redacted]"
	}
	redactors.Store(key, r)
	return r, nil
}
