package bot

import (
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	tokens "github.com/hookroom/hookroom/usage"
)

// !usage reports the room's agents (and others that answered there this
// month) for today and this month, the asker's own day against the budget;
// !usage all is for administrators.
func TestUsageCommand(t *testing.T) {
	ctx := t.Context()
	db := tempSQLite(t)
	store := tokens.New(db)
	if err := store.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	const (
		room  = id.RoomID("!room:localhost")
		other = id.RoomID("!other:localhost")
		alice = id.UserID("@alice:localhost")
		bob   = id.UserID("@bob:localhost")
	)
	now := time.Now().UTC()
	month := tokens.MonthStart(now)
	for _, tr := range []tokens.Turn{
		{SourceEventID: "$1", Agent: "helper", RoomID: room, Requester: alice, InputTokens: 1200, OutputTokens: 300, CachedTokens: 1000, ModelCalls: 1, At: now},
		{SourceEventID: "$2", Agent: "helper", RoomID: other, Requester: alice, InputTokens: 50, OutputTokens: 50, ModelCalls: 1, At: now},
		// Earlier this month (the first millisecond of it): not today,
		// unless today is the 1st.
		{SourceEventID: "$3", Agent: "retired", RoomID: room, Requester: bob, InputTokens: 10, OutputTokens: 5, ModelCalls: 1, At: month},
	} {
		if err := store.Record(ctx, tr); err != nil {
			t.Fatal(err)
		}
	}
	budget := 5000
	cfg := &config.Config{
		Agents: map[string]config.Agent{
			"helper": {DisplayName: "Helper", DailyTokenBudget: &budget},
			"coder":  {},
		},
		Usage: config.Usage{DailyTokensPerUser: 100000},
	}
	b := &Bot{usage: store}
	b.state.Store(&world{cfg: cfg, joined: map[hooks.AgentName][]id.RoomID{"helper": {room}}})

	retiredToday := "no turns"
	if tokens.DayStart(now).Equal(month) {
		retiredToday = "15 tokens (10 in, 5 out) in 1 turn"
	}
	mon := now.Format("January")
	cases := []struct {
		name  string
		args  []string
		admin bool
		want  []string
		not   []string
	}{
		{"room", nil, false, []string{
			"**Token usage in this room**",
			"- **Helper**: today 1,500 tokens (1,200 in, 1,000 of them cached, 300 out) in 1 turn · " + mon + " 1,500 tokens (1,200 in, 1,000 of them cached, 300 out) in 1 turn\n",
			"- **retired**: today " + retiredToday + " · " + mon + " 15 tokens (10 in, 5 out) in 1 turn\n",
			"You today: 1,600 of your daily budget of 100,000 tokens.",
			"Agent budgets today, everywhere: Helper 1,600 of 5,000.",
			"Budgets reset at 00:00 UTC (in ",
		}, []string{"coder"}},
		{"every room", []string{"ALL"}, true, []string{
			"**Token usage in every room**",
			"- **coder**: today no turns · " + mon + " no turns\n",
			"- **Helper**: today 1,600 tokens (1,250 in, 1,000 of them cached, 350 out) in 2 turns",
		}, nil},
		{"every room, not an administrator", []string{"all"}, false, []string{"Only hookroom's administrators"}, []string{"Token usage"}},
		{"unknown argument", []string{"yesterday"}, true, []string{"`!usage all`"}, []string{"Token usage"}},
	}
	for _, tc := range cases {
		got := b.usageCommand(ctx, b.w(), room, alice, tc.args, tc.admin)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: %q lacks %q", tc.name, got, w)
			}
		}
		for _, w := range tc.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: %q has %q", tc.name, got, w)
			}
		}
	}

	// Without budgets, the answer says so and mentions no reset.
	b.state.Store(&world{cfg: &config.Config{Agents: map[string]config.Agent{"helper": {}}}, joined: map[hooks.AgentName][]id.RoomID{"helper": {room}}})
	got := b.usageCommand(ctx, b.w(), room, bob, nil, false)
	if !strings.Contains(got, "You today: 0 tokens, everywhere (no daily budget per person).") || strings.Contains(got, "reset") {
		t.Errorf("without budgets: %q", got)
	}
}
