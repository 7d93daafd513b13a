package turn

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/usage"
)

// TestUserError: what a person reads when a turn's model call fails — it
// says what went wrong in their terms and never the provider's raw text.
func TestUserError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"timeout", &agents.ModelError{Kind: agents.ErrorTimeout}, "the model took too long."},
		{"rate limited", &agents.ModelError{StatusCode: 429, Retryable: true}, "the model is busy (rate limited); try again in a moment."},
		{"bad key", &agents.ModelError{StatusCode: 401, Message: "invalid key sk-secret"}, "the model rejected hookroom's credentials."},
		{"forbidden", &agents.ModelError{StatusCode: 403}, "the model rejected hookroom's credentials."},
		{"overloaded", &agents.ModelError{StatusCode: 503, Retryable: true}, "the model is unavailable right now; try again in a moment."},
		{"bad request", &agents.ModelError{StatusCode: 400, Message: "context too long"}, "the model returned an error."},
		{"wrapped", fmt.Errorf("failed to run turn: %w", &agents.ModelError{StatusCode: 429}), "the model is busy (rate limited); try again in a moment."},
		{"too many tools", fmt.Errorf("failed: %w", agents.ErrToolIterations), "it needed too many tool calls."},
		{"the turn's deadline", errTurnTimeout, "it took longer than 10m0s."},
		{"anything else", errors.New("connection reset by peer"), "the model call failed."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := userError(tt.err); got != tt.want {
				t.Errorf("userError = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestBudgetNotice(t *testing.T) {
	now := time.Date(2026, 11, 23, 19, 18, 40, 0, time.UTC)
	resets := usage.NextDay(now)
	cases := []struct {
		ex   usage.Exceeded
		at   time.Time
		want string
	}{
		{usage.Exceeded{Scope: usage.ScopePerson, Limit: 200000, Used: 201345, Resets: resets}, now,
			"⏳ You have used up your daily budget of 200,000 tokens (201,345 used today), so the agents cannot answer you until it resets. It resets at 00:00 UTC (in 4 h 41 min)."},
		{usage.Exceeded{Scope: usage.ScopeAgent, Limit: 1000, Used: 1000, Resets: resets}, resets.Add(-20 * time.Minute),
			"⏳ Coder has used up its daily budget of 1,000 tokens, so it cannot answer today. It resets at 00:00 UTC (in 20 min)."},
		{usage.Exceeded{Scope: usage.ScopeAgent, Limit: 5, Used: 9, Resets: resets}, resets.Add(-10 * time.Second),
			"⏳ Coder has used up its daily budget of 5 tokens, so it cannot answer today. It resets at 00:00 UTC (in less than a minute)."},
	}
	for _, tc := range cases {
		if got := budgetNotice(&tc.ex, "Coder", tc.at); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
