package agents_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents"
)

func TestEchoModel(t *testing.T) {
	cases := []struct {
		name string
		msgs []agents.Message
		want string
	}{
		{
			name: "repeats the last user message",
			msgs: []agents.Message{{Role: agents.RoleSystem, Content: "sys"}, {Role: agents.RoleUser, Content: "first"}, {Role: agents.RoleAssistant, Content: "x"}, {Role: agents.RoleUser, Content: "hello  there\nfriend"}},
			want: "[echo model] I am the echo model, a stand-in for a real model; I repeat your last message:\n\nhello  there\nfriend",
		},
		{
			name: "nothing to repeat",
			msgs: []agents.Message{{Role: agents.RoleSystem, Content: "sys"}},
			want: "[echo model] I am the echo model, a stand-in for a real model; I repeat your last message, but there was nothing to repeat.",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := agents.NewModel(agents.ModelSpec{Provider: agents.ProviderEcho})
			if err != nil {
				t.Fatal(err)
			}
			var deltas []string
			req := &agents.Request{Messages: tc.msgs, Tools: []agents.ToolSpec{{Name: "current_time"}}}
			c, err := agents.Complete(t.Context(), m, req, func(d string) { deltas = append(deltas, d) })
			if err != nil {
				t.Fatal(err)
			}
			if c.Text != tc.want || strings.Join(deltas, "") != tc.want || agents.EchoReply(tc.msgs) != tc.want {
				t.Errorf("reply = %q", c.Text)
			}
			if len(deltas) < 5 {
				t.Errorf("reply came in %d pieces, want it streamed", len(deltas))
			}
			if !strings.HasPrefix(c.Text, agents.EchoPrefix) || len(c.ToolCalls) != 0 || c.FinishReason != agents.FinishStop || c.Usage.TotalTokens == 0 {
				t.Errorf("completion = %+v", c)
			}
		})
	}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := agents.Complete(ctx, agents.EchoModel{}, &agents.Request{}, nil)
		var me *agents.ModelError
		if !errors.As(err, &me) || me.Kind != agents.ErrorCancelled {
			t.Errorf("error = %v", err)
		}
	})
	t.Run("in the tool loop", func(t *testing.T) {
		res, err := agents.Run(t.Context(), agents.RunRequest{Model: agents.EchoModel{}, Messages: []agents.Message{{Role: agents.RoleUser, Content: "ping"}}})
		if err != nil || !strings.HasSuffix(res.Text, "\n\nping") || len(res.Messages) != 1 {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
}
