package turn

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/team"
	"github.com/hookroom/hookroom/tracking"
	"github.com/hookroom/hookroom/usage"
)

// fakeMembers is a team.Runner whose members answer at once and whose
// leader writes "synthesis"; it records which members ran.
type fakeMembers struct {
	mu  sync.Mutex
	ran []hooks.AgentName
}

func (f *fakeMembers) RunMember(_ context.Context, member hooks.AgentName, _ team.Task) (team.MemberResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ran = append(f.ran, member)
	return team.MemberResult{Text: string(member) + " answers", ModelCalls: 1}, nil
}

func (f *fakeMembers) Lead(context.Context, team.LeadRequest) (team.MemberResult, error) {
	return team.MemberResult{Text: "synthesis", ModelCalls: 1}, nil
}

// endedRecorder records the subagent:ended outcomes of a team run.
type endedRecorder struct {
	mu    sync.Mutex
	ended map[hooks.AgentName]string // outcome: error
}

func (r *endedRecorder) Spawned(context.Context, team.SubagentInfo) {}

func (r *endedRecorder) Ended(_ context.Context, info team.SubagentInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended[info.AgentID] = string(info.Outcome) + ": " + info.Error
}

// A team turn checks each member's daily token budget, and the person's,
// before the member runs, on the usage the database recorded today: a
// member over budget does not run (its run ends with outcome error and the
// reason, and the reply shows the line), the others answer; when every
// member is over, nobody answers; an unreadable budget lets the member run.
func TestMemberBudgets(t *testing.T) {
	ctx := context.Background()
	db, err := tracking.OpenSQLite(ctx, filepath.Join(t.TempDir(), "hookroom.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := usage.New(db)
	if err := store.Upgrade(ctx); err != nil {
		t.Fatal(err)
	}
	const person = id.UserID("@alice:example.org")
	// Today beta used 500 tokens and the person 500 (beta's turn) + 100.
	for _, u := range []usage.Turn{
		{SourceEventID: "$a", Agent: "beta", Requester: person, InputTokens: 400, OutputTokens: 100, ModelCalls: 1},
		{SourceEventID: "$b", Agent: "alpha", Requester: "@bob:example.org", InputTokens: 50, OutputTokens: 50, ModelCalls: 1},
		{SourceEventID: "$c", Agent: "gamma", Requester: person, InputTokens: 100, ModelCalls: 1},
	} {
		if err := store.Record(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	def := team.Definition{Name: "crew", Members: []hooks.AgentName{"alpha", "beta"}, Mode: team.ModeCollaborate, Leader: "alpha"}
	for _, tc := range []struct {
		name      string
		perUser   int
		daily     map[hooks.AgentName]int
		failCheck bool
		wantRan   []hooks.AgentName
		wantEnded map[hooks.AgentName]string
		wantLine  string // in the folded reply
		wantErr   bool   // every member over: no reply
	}{
		{name: "no budgets", wantRan: []hooks.AgentName{"alpha", "beta"},
			wantEnded: map[hooks.AgentName]string{"alpha": "ok: ", "beta": "ok: "}},
		{name: "budgets left", perUser: 1000, daily: map[hooks.AgentName]int{"alpha": 101, "beta": 501},
			wantRan: []hooks.AgentName{"alpha", "beta"}, wantEnded: map[hooks.AgentName]string{"alpha": "ok: ", "beta": "ok: "}},
		{name: "beta over its own budget", daily: map[hooks.AgentName]int{"alpha": 1000, "beta": 500},
			wantRan: []hooks.AgentName{"alpha"},
			wantEnded: map[hooks.AgentName]string{"alpha": "ok: ",
				"beta": "error: over its daily budget (500 of 500 tokens used today; it resets at 00:00 UTC)"},
			wantLine: "> ⚠️ **Beta** could not answer: over its daily budget (500 of 500 tokens used today; it resets at 00:00 UTC)"},
		{name: "the person over", perUser: 600, wantErr: true,
			wantEnded: map[hooks.AgentName]string{
				"alpha": "error: the person's daily budget is used up (600 of 600 tokens used today; it resets at 00:00 UTC)",
				"beta":  "error: the person's daily budget is used up (600 of 600 tokens used today; it resets at 00:00 UTC)"}},
		{name: "budgets unreadable", daily: map[hooks.AgentName]int{"beta": 1}, failCheck: true,
			wantRan: []hooks.AgentName{"alpha", "beta"}, wantEnded: map[hooks.AgentName]string{"alpha": "ok: ", "beta": "ok: "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeMembers{}
			obs := &endedRecorder{ended: map[hooks.AgentName]string{}}
			gate := &memberBudgets{Runner: inner, log: zerolog.Nop(), check: func(ctx context.Context, member hooks.AgentName) (*usage.Exceeded, error) {
				if tc.failCheck {
					return nil, errors.New("database down")
				}
				return store.Check(ctx, time.Now(), member, person, usage.Budgets{PerUser: tc.perUser, PerAgent: tc.daily[member]})
			}}
			res, err := team.Run(ctx, team.Plan{Team: def, SourceEventID: "$q", Question: "tea?", Observer: obs}, gate)
			var mf *team.MembersFailedError
			if tc.wantErr != errors.As(err, &mf) {
				t.Fatalf("Run: %v, want a MembersFailedError: %v", err, tc.wantErr)
			}
			if mf != nil && !strings.Contains(mf.Error(), "beta: the person's daily budget is used up") {
				t.Errorf("Run: %v, want the members over the person's budget", mf)
			}
			slices.Sort(inner.ran)
			if !slices.Equal(inner.ran, tc.wantRan) {
				t.Errorf("members ran %v, want %v", inner.ran, tc.wantRan)
			}
			for m, want := range tc.wantEnded {
				if got := obs.ended[m]; got != want {
					t.Errorf("subagent:ended of %s: %q, want %q", m, got, want)
				}
			}
			if tc.wantErr {
				return
			}
			reply := team.RenderFolded(res, map[hooks.AgentName]string{"alpha": "Alpha", "beta": "Beta"})
			if tc.wantLine != "" && !strings.Contains(reply, tc.wantLine) {
				t.Errorf("the reply lacks %q:\n%s", tc.wantLine, reply)
			}
			if !strings.HasSuffix(reply, "synthesis") || !strings.Contains(reply, "alpha answers") {
				t.Errorf("the reply lacks alpha's answer or the synthesis:\n%s", reply)
			}
		})
	}
}
