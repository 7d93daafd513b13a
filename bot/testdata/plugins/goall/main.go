// Command goall is a test plugin (Go SDK) that enriches, transforms, gates
// and observes.
package main

import (
	"context"
	"os"
	"path/filepath"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins/sdk"
)

var plugin = sdk.Plugin{
	Name:    "goall",
	Version: "1.0.0",
	Hooks: []hooks.Hook{
		hooks.Handle(hooks.MessageEnrich, "enrich", func(_ context.Context, c *hooks.MessageEnrichContext) error {
			c.AddMetadata("go_item", "from go")
			return nil
		}, hooks.Priority(20)),
		hooks.Handle(hooks.MessageBeforeResponse, "transform", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text += " [go]"
			return nil
		}, hooks.Priority(20)),
		hooks.Handle(hooks.ToolBeforeCall, "gate", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			if c.Tool == "current_time" {
				c.Decline("go says no")
			}
			return nil
		}, hooks.Priority(20)),
		hooks.Handle(hooks.MessageAfterResponse, "observe", func(_ context.Context, c *hooks.AfterResponseContext) error {
			dir, err := c.StateRoot()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(filepath.Join(dir, "seen.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString(c.Result.Text + "\n")
			return err
		}),
	},
}

func main() { sdk.Main(plugin) }
