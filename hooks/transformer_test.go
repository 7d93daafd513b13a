package hooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// On message:before_response a suppressed draft does not end the chain:
// later hooks see Suppress set and may clear it.
func TestBeforeResponseSuppressionDoesNotEndTheChain(t *testing.T) {
	suppress := func(_ context.Context, c *hooks.BeforeResponseContext) error {
		c.Draft.Suppress = true
		c.Draft.Text += "+s"
		return nil
	}
	unsuppress := func(_ context.Context, c *hooks.BeforeResponseContext) error {
		c.Draft.Suppress = false
		c.Draft.Text += "+u"
		return nil
	}
	for _, tc := range []struct {
		name         string
		hooks        []func(context.Context, *hooks.BeforeResponseContext) error
		wantText     string
		wantSuppress bool
		wantSeen     string // Suppress as each hook saw it
	}{
		{"suppress stays", []func(context.Context, *hooks.BeforeResponseContext) error{suppress, nil}, "draft+s+n", true, "false,true"},
		{"later hook clears it", []func(context.Context, *hooks.BeforeResponseContext) error{suppress, unsuppress, nil}, "draft+s+u+n", false, "false,true,false"},
		{"suppressed again", []func(context.Context, *hooks.BeforeResponseContext) error{suppress, unsuppress, suppress}, "draft+s+u+s", true, "false,true,false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			var hs []hooks.Hook
			for i, fn := range tc.hooks {
				hs = append(hs, hooks.Handle(hooks.MessageBeforeResponse, fmt.Sprintf("h%d", i), func(ctx context.Context, c *hooks.BeforeResponseContext) error {
					seen = append(seen, fmt.Sprint(c.Draft.Suppress))
					if fn == nil {
						c.Draft.Text += "+n"
						return nil
					}
					return fn(ctx, c)
				}))
			}
			reg := hooktest.NewRegistry(t, hs...)
			c := hooktest.BeforeResponse("draft")
			hooktest.Emit(t, reg, hooks.MessageBeforeResponse, c)
			if c.Draft.Text != tc.wantText || c.Draft.Suppress != tc.wantSuppress {
				t.Errorf("draft %q suppress=%v, want %q %v", c.Draft.Text, c.Draft.Suppress, tc.wantText, tc.wantSuppress)
			}
			if got := strings.Join(seen, ","); got != tc.wantSeen {
				t.Errorf("hooks saw suppress %s, want %s", got, tc.wantSeen)
			}
		})
	}
}
