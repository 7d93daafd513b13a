package bot

import (
	"testing"
	"time"

	tokens "github.com/hookroom/hookroom/usage"
)

func TestGroupDigits(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 123456: "123,456",
		1234567: "1,234,567", -1234: "-1,234", -999: "-999",
	} {
		if got := groupDigits(n); got != want {
			t.Errorf("groupDigits(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestBudgetNotice(t *testing.T) {
	now := time.Date(2026, 11, 23, 19, 18, 40, 0, time.UTC)
	resets := tokens.NextDay(now)
	cases := []struct {
		ex   tokens.Exceeded
		at   time.Time
		want string
	}{
		{tokens.Exceeded{Scope: tokens.ScopePerson, Limit: 200000, Used: 201345, Resets: resets}, now,
			"⏳ You have used up your daily budget of 200,000 tokens (201,345 used today), so the agents cannot answer you until it resets. It resets at 00:00 UTC (in 4 h 41 min)."},
		{tokens.Exceeded{Scope: tokens.ScopeAgent, Limit: 1000, Used: 1000, Resets: resets}, resets.Add(-20 * time.Minute),
			"⏳ Coder has used up its daily budget of 1,000 tokens, so it cannot answer today. It resets at 00:00 UTC (in 20 min)."},
		{tokens.Exceeded{Scope: tokens.ScopeAgent, Limit: 5, Used: 9, Resets: resets}, resets.Add(-10 * time.Second),
			"⏳ Coder has used up its daily budget of 5 tokens, so it cannot answer today. It resets at 00:00 UTC (in less than a minute)."},
	}
	for _, tc := range cases {
		if got := budgetNotice(&tc.ex, "Coder", tc.at); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}
