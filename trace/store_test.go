package trace

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// forStores runs f on SQLite and PostgreSQL like dbtest.ForStores (a fresh
// database, the store upgraded twice), but only on SQLite under -short, so
// the unit tests need no PostgreSQL.
func forStores(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Helper()
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		if testing.Short() && d.Name != dbtest.SQLite.Name {
			t.Skip("-short: SQLite only")
		}
		s := New(d.Fresh(t))
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := s.Upgrade(t.Context()); err != nil {
			t.Fatalf("second Upgrade: %v", err)
		}
		f(t, s)
	})
}

const (
	roomA = id.RoomID("!a:localhost")
	roomB = id.RoomID("!b:localhost")
	alice = id.UserID("@alice:localhost")
	bob   = id.UserID("@bob:localhost")
)

// base is a time to the millisecond (what the store keeps), in time.Local
// as the store returns it.
var base = time.UnixMilli(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).UnixMilli())

// full is a trace with every field and list filled, and text beyond ASCII.
func full() *Trace {
	return &Trace{
		EventID: "$msg:localhost", Agent: "helper", RoomID: roomA, ThreadID: "$root:localhost", Sender: alice,
		CorrelationID: "c0ffee", Replayed: true,
		Started: base, Ended: base.Add(1234 * time.Millisecond),
		Outcome: OutcomeResponded, Detail: "ok — fertig ✓", Tokens: 321,
		Stages: []Stage{
			{Name: StageReceived, At: 0}, {Name: StageRouted, At: 3 * time.Millisecond},
			{Name: StageFirstToken, At: 400 * time.Millisecond}, {Name: StageFinal, At: 1234 * time.Millisecond},
		},
		Hooks: []HookRun{
			{Event: "message:received", Plugin: "moderation", Hook: "check", Mode: "sequential", At: time.Millisecond, Duration: 987 * time.Microsecond, Effect: EffectUnchanged},
			{Event: "message:sending", Plugin: "polish", Hook: "fix", Mode: "modifying", At: 1200 * time.Millisecond, Duration: 2 * time.Millisecond, Effect: EffectChanged, Change: "response_text: 'Hi' → 'Grüß dich 👋'"},
			{Event: "message:sending", Plugin: "slow", Hook: "wait", Mode: "modifying", At: 1210 * time.Millisecond, Duration: time.Second, Effect: EffectTimedOut, Error: "deadline exceeded"},
			{Event: "tool:before_call", Plugin: "guard", Hook: "gate", Mode: "claiming", At: 500 * time.Millisecond, Duration: time.Millisecond, Effect: EffectApprovalRequired},
		},
		Models: []ModelCall{
			{Model: "gpt-4o-mini", At: 5 * time.Millisecond, Latency: 300 * time.Millisecond, PromptTokens: 200, CompletionTokens: 21, CachedTokens: 100, FinishReason: "tool_calls"},
			{Model: "gpt-4o-mini", At: 700 * time.Millisecond, Latency: 500 * time.Millisecond, PromptTokens: 90, CompletionTokens: 10, FinishReason: "stop", Error: "partial: 流式中断"},
		},
		Tools: []ToolCall{
			{Name: "search", Arguments: `{"q":"café"}`, Result: `["résumé"]`, At: 310 * time.Millisecond, Duration: 50 * time.Millisecond},
			{Name: "shell", Arguments: `{"cmd":"rm -rf /"}`, At: 360 * time.Millisecond, Declined: true, Reason: "nein", Error: "declined"},
		},
		Approvals: []Approval{{ID: "ap1", Tool: "shell", Decision: "denied", DecidedBy: bob, At: 650 * time.Millisecond}},
		Delivery: []Delivery{
			{Kind: DeliveryPlaceholder, EventID: "$ph:localhost", At: 10 * time.Millisecond},
			{Kind: DeliveryEdit, EventID: "$ed:localhost", At: 600 * time.Millisecond},
			{Kind: DeliveryMessage, EventID: "$fi:localhost", At: 1234 * time.Millisecond},
		},
		Dropped: 2,
	}
}

func TestStoreSaveGet(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		in := full()
		traceID, err := s.Save(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if in.ID != 0 {
			t.Errorf("Save changed the trace's ID to %d", in.ID)
		}
		got, err := s.Get(ctx, traceID)
		if err != nil {
			t.Fatal(err)
		}
		want := *in
		want.ID = traceID
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("Get = %+v\nwant %+v", got, &want)
		}

		// The summary counts the hooks: one changed, one failed, one asked for approval.
		list, err := s.List(ctx, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		wantSum := Summary{
			ID: traceID, EventID: in.EventID, Agent: in.Agent, RoomID: in.RoomID, ThreadID: in.ThreadID, Sender: in.Sender,
			CorrelationID: in.CorrelationID, Replayed: true, Started: in.Started, Ended: in.Ended, Duration: 1234 * time.Millisecond,
			Outcome: in.Outcome, Detail: in.Detail, Tokens: 321, Hooks: 4, ChangedHooks: 2, FailedHooks: 1,
		}
		if len(list) != 1 || list[0] != wantSum {
			t.Errorf("List = %+v\nwant [%+v]", list, wantSum)
		}

		// An empty trace round-trips too (nil lists stay nil).
		empty := &Trace{EventID: "$e:localhost", Agent: "coder", Started: base, Ended: base, Outcome: "suppressed"}
		emptyID, err := s.Save(ctx, empty)
		if err != nil {
			t.Fatal(err)
		}
		if emptyID <= traceID {
			t.Errorf("second id %d not above the first %d", emptyID, traceID)
		}
		got, err = s.Get(ctx, emptyID)
		if err != nil {
			t.Fatal(err)
		}
		want = *empty
		want.ID = emptyID
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("Get = %+v\nwant %+v", got, &want)
		}

		if n, err := s.Count(ctx); err != nil || n != 2 {
			t.Errorf("Count = %d, %v; want 2", n, err)
		}
		if _, err := s.Save(ctx, nil); err == nil {
			t.Error("Save(nil) succeeded")
		}
	})
}

// Milliseconds are kept; nanoseconds are not (and do not fail anything).
func TestStoreSaveRoundsToMilliseconds(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		start := time.Now() // with a monotonic reading and nanoseconds
		tr := &Trace{EventID: "$1", Agent: "a", Started: start, Ended: start.Add(1500*time.Microsecond + 7)}
		traceID, err := s.Save(t.Context(), tr)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(t.Context(), traceID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Started.Equal(time.UnixMilli(start.UnixMilli())) || !got.Ended.Equal(time.UnixMilli(tr.Ended.UnixMilli())) {
			t.Errorf("Started, Ended = %v, %v; want %v, %v to the millisecond", got.Started, got.Ended, start, tr.Ended)
		}
		list, err := s.List(t.Context(), Filter{})
		if err != nil || len(list) != 1 || list[0].Duration != time.Millisecond {
			t.Errorf("List = %+v, %v; want one trace of 1ms", list, err)
		}
	})
}

// A trace saved inside a transaction that rolls back is not kept, nor
// counted.
func TestStoreSaveJoinsTransaction(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		boom := errors.New("boom")
		var traceID int64
		err := s.db.DoTxn(ctx, nil, func(ctx context.Context) error {
			var err error
			if traceID, err = s.Save(ctx, sample(1)); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("DoTxn = %v", err)
		}
		if _, err := s.Get(ctx, traceID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get after rollback: %v, want ErrNotFound", err)
		}
		if n, err := s.Count(ctx); err != nil || n != 0 {
			t.Errorf("Count after rollback = %d, %v; want 0", n, err)
		}
	})
}

// Turns end at once: concurrent saves all land, with distinct ids, and
// are all counted.
func TestStoreSaveConcurrent(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		const n = 20
		ids := make([]int64, n)
		wins, errs := dbtest.Race(n, func(i int) (bool, error) {
			traceID, err := s.Save(t.Context(), sample(i))
			ids[i] = traceID
			return err == nil, err
		})
		if wins != n || len(errs) != 0 {
			t.Fatalf("%d of %d saves succeeded: %v", wins, n, errs)
		}
		slices.Sort(ids)
		if len(slices.Compact(ids)) != n {
			t.Errorf("ids %v not distinct", ids)
		}
		if c, err := s.Count(t.Context()); err != nil || c != n {
			t.Errorf("Count = %d, %v; want %d", c, err, n)
		}
	})
}

func TestStoreNotFound(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		for _, traceID := range []int64{0, 1, -1, 1 << 62} {
			tr, err := s.Get(t.Context(), traceID)
			if !errors.Is(err, ErrNotFound) || tr != nil {
				t.Errorf("Get(%d) = %v, %v; want ErrNotFound", traceID, tr, err)
			}
		}
	})
}

// sample is the i-th trace of a small set: agents, rooms, senders and
// outcomes cycle with different periods.
func sample(i int) *Trace {
	agents := []hooks.AgentName{"helper", "coder", "writer"}
	rooms := []id.RoomID{roomA, roomB}
	senders := []id.UserID{alice, bob}
	outcomes := []string{OutcomeResponded, OutcomeResponded, "suppressed", "error"}
	at := base.Add(time.Duration(i) * time.Minute)
	return &Trace{
		EventID: id.EventID(fmt.Sprintf("$%d", i)), Agent: agents[i%3], RoomID: rooms[i%2], Sender: senders[(i/2)%2],
		Started: at, Ended: at.Add(time.Second), Outcome: outcomes[i%4],
		Hooks: []HookRun{{Event: "message:received", Plugin: "p", Hook: "h", Effect: EffectUnchanged}},
	}
}

// num is the number of a sample's trace.
func num(tr *Trace) int {
	var i int
	_, _ = fmt.Sscanf(string(tr.EventID), "$%d", &i)
	return i
}

func TestStoreList(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		const n = 60
		ids := make([]int64, n)
		for i := range n {
			traceID, err := s.Save(ctx, sample(i))
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = traceID
		}
		// want returns the ids of the samples pick selects, newest first.
		want := func(pick func(tr *Trace) bool) []int64 {
			var out []int64
			for i := n - 1; i >= 0; i-- {
				if pick(sample(i)) {
					out = append(out, ids[i])
				}
			}
			return out
		}
		all := func(*Trace) bool { return true }
		cases := []struct {
			name string
			f    Filter
			want []int64
		}{
			{"everything", Filter{}, want(all)[:DefaultListLimit]},
			{"limit", Filter{Limit: 7}, want(all)[:7]},
			{"limit above the max", Filter{Limit: 10 * MaxListLimit}, want(all)},
			{"negative limit", Filter{Limit: -1}, want(all)[:DefaultListLimit]},
			{"agent", Filter{Agent: "coder"}, want(func(tr *Trace) bool { return tr.Agent == "coder" })},
			{"room", Filter{RoomID: roomB}, want(func(tr *Trace) bool { return tr.RoomID == roomB })},
			{"sender", Filter{Sender: bob}, want(func(tr *Trace) bool { return tr.Sender == bob })},
			{"outcome", Filter{Outcome: "error"}, want(func(tr *Trace) bool { return tr.Outcome == "error" })},
			{"agent and room", Filter{Agent: "helper", RoomID: roomA}, want(func(tr *Trace) bool { return tr.Agent == "helper" && tr.RoomID == roomA })},
			{"all filters", Filter{Agent: "writer", RoomID: roomA, Sender: bob, Outcome: "suppressed", Limit: 500},
				want(func(tr *Trace) bool {
					return tr.Agent == "writer" && tr.RoomID == roomA && tr.Sender == bob && tr.Outcome == "suppressed"
				})},
			{"before", Filter{Before: ids[10]}, want(func(tr *Trace) bool { return num(tr) < 10 })},
			{"before and agent", Filter{Agent: "coder", Before: ids[30], Limit: 3}, want(func(tr *Trace) bool { return tr.Agent == "coder" && num(tr) < 30 })[:3]},
			{"before the first", Filter{Before: ids[0]}, nil},
			{"nothing", Filter{Agent: "nobody"}, nil},
		}
		for _, tc := range cases {
			got, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var gotIDs []int64
			for _, sum := range got {
				gotIDs = append(gotIDs, sum.ID)
			}
			if len(tc.want) == 0 && len(gotIDs) == 0 {
				continue
			}
			if !reflect.DeepEqual(gotIDs, tc.want) {
				t.Errorf("%s: ids %v, want %v", tc.name, gotIDs, tc.want)
			}
		}

		// Paging with Before walks every trace once, newest first.
		var paged []int64
		f := Filter{Limit: 7}
		for {
			page, err := s.List(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) == 0 {
				break
			}
			for _, sum := range page {
				paged = append(paged, sum.ID)
			}
			f.Before = page[len(page)-1].ID
		}
		if !reflect.DeepEqual(paged, want(all)) {
			t.Errorf("paged ids %v, want %v", paged, want(all))
		}

		agents, err := s.Agents(ctx)
		if err != nil || !reflect.DeepEqual(agents, []hooks.AgentName{"coder", "helper", "writer"}) {
			t.Errorf("Agents = %v, %v", agents, err)
		}
		outcomes, err := s.Outcomes(ctx)
		if err != nil || !reflect.DeepEqual(outcomes, []string{"error", OutcomeResponded, "suppressed"}) {
			t.Errorf("Outcomes = %v, %v", outcomes, err)
		}
	})
}

func TestStoreFacetsEmpty(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		if a, err := s.Agents(t.Context()); err != nil || len(a) != 0 {
			t.Errorf("Agents = %v, %v; want none", a, err)
		}
		if o, err := s.Outcomes(t.Context()); err != nil || len(o) != 0 {
			t.Errorf("Outcomes = %v, %v; want none", o, err)
		}
		if n, err := s.Count(t.Context()); err != nil || n != 0 {
			t.Errorf("Count = %d, %v; want 0", n, err)
		}
		if l, err := s.List(t.Context(), Filter{}); err != nil || len(l) != 0 {
			t.Errorf("List = %v, %v; want none", l, err)
		}
	})
}

// A message answered by two agents, one of whose turns was replayed after a
// crash: three runs, oldest first, all kept.
func TestStoreForEvent(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		first := &Trace{EventID: "$m", Agent: "helper", RoomID: roomA, Sender: alice, Started: base, Ended: base, Outcome: "error", Detail: "crashed"}
		other := &Trace{EventID: "$m", Agent: "coder", RoomID: roomA, Sender: alice, Started: base, Ended: base, Outcome: OutcomeClaimed}
		replay := &Trace{EventID: "$m", Agent: "helper", RoomID: roomA, Sender: alice, Replayed: true, Started: base, Ended: base, Outcome: OutcomeResponded}
		unrelated := &Trace{EventID: "$n", Agent: "helper", Started: base, Ended: base}
		var ids []int64
		for _, tr := range []*Trace{first, unrelated, other, replay} {
			traceID, err := s.Save(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, traceID)
		}
		got, err := s.ForEvent(ctx, "$m")
		if err != nil {
			t.Fatal(err)
		}
		var gotIDs []int64
		var gotReplayed []bool
		for _, sum := range got {
			gotIDs, gotReplayed = append(gotIDs, sum.ID), append(gotReplayed, sum.Replayed)
		}
		if !reflect.DeepEqual(gotIDs, []int64{ids[0], ids[2], ids[3]}) || !reflect.DeepEqual(gotReplayed, []bool{false, false, true}) {
			t.Errorf("ForEvent = ids %v replayed %v; want %v [false false true]", gotIDs, gotReplayed, []int64{ids[0], ids[2], ids[3]})
		}
		if got, err := s.ForEvent(ctx, "$none"); err != nil || len(got) != 0 {
			t.Errorf("ForEvent of an unknown message = %v, %v", got, err)
		}
	})
}

func TestStorePrune(t *testing.T) {
	forStores(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		// More old traces than one batch, interleaved with new ones by id.
		const old, recent = pruneBatch + 250, 40
		cut := base.Add(time.Hour)
		var keep, pruned []int64
		for i := range old + recent {
			tr := sample(i)
			if i%((old+recent)/recent) == 0 && len(keep) < recent {
				tr.Ended = cut.Add(time.Duration(i) * time.Millisecond) // at or after the cut: kept
			} else {
				tr.Ended = cut.Add(-time.Millisecond - time.Duration(i)*time.Millisecond)
			}
			traceID, err := s.Save(ctx, tr)
			if err != nil {
				t.Fatal(err)
			}
			if !tr.Ended.Before(cut) {
				keep = append(keep, traceID)
			} else {
				pruned = append(pruned, traceID)
			}
		}
		n, err := s.Prune(ctx, cut)
		if err != nil {
			t.Fatal(err)
		}
		if n != int64(old+recent-len(keep)) {
			t.Errorf("Prune = %d, want %d", n, old+recent-len(keep))
		}
		list, err := s.List(ctx, Filter{Limit: MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for i := len(list) - 1; i >= 0; i-- {
			got = append(got, list[i].ID)
		}
		if !reflect.DeepEqual(got, keep) {
			t.Errorf("kept %v, want %v", got, keep)
		}
		if c, err := s.Count(ctx); err != nil || c != int64(len(keep)) {
			t.Errorf("Count = %d, %v; want %d", c, err, len(keep))
		}
		if n, err := s.Prune(ctx, cut); err != nil || n != 0 {
			t.Errorf("second Prune = %d, %v; want 0", n, err)
		}
		for _, traceID := range []int64{pruned[0], pruned[len(pruned)-1]} {
			if _, err := s.Get(ctx, traceID); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get of pruned trace %d: %v, want ErrNotFound", traceID, err)
			}
		}
	})
}

// On SQLite every query of the store reads through an index (no full scan
// but the newest-first walk of the primary key that LIMIT stops, no sort),
// so it costs the same with 100,000 traces as with ten. The benchmarks log
// PostgreSQL's plans (go test -v -bench).
func TestStoreQueryPlans(t *testing.T) {
	s := New(dbtest.SQLite.Fresh(t))
	if err := s.Upgrade(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.Save(t.Context(), sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	type query struct {
		name, q string
		args    []any
		want    string // in the plan
	}
	var queries []query
	for _, f := range []Filter{
		{Agent: "a"}, {RoomID: roomA}, {Sender: alice}, {Outcome: "error"},
		{Agent: "a", Before: 5}, {Sender: alice, Before: 5, Limit: 500},
		{Agent: "a", RoomID: roomA}, {Agent: "a", RoomID: roomA, Sender: alice, Outcome: "error", Before: 5},
	} {
		q, args := f.query()
		queries = append(queries, query{fmt.Sprintf("list %+v", f), q, args, "USING INDEX trace_turn_"})
	}
	q, args := Filter{}.query()
	queries = append(queries, query{"list", q, args, "SCAN trace_turn"})
	q, args = Filter{Before: 5}.query()
	queries = append(queries,
		query{"list before", q, args, "USING INTEGER PRIMARY KEY"},
		query{"get", "SELECT " + summaryColumns + ", details FROM trace_turn WHERE id = $1", []any{1}, "USING INTEGER PRIMARY KEY"},
		query{"for event", "SELECT " + summaryColumns + " FROM trace_turn WHERE event_id = $1 ORDER BY id", []any{"$1"}, "USING INDEX trace_turn_event_idx"},
		query{"prune", pruneQuery, []any{0}, "USING COVERING INDEX trace_turn_ended_idx"},
		query{"agents", distinctQuery("agent"), nil, "USING COVERING INDEX trace_turn_agent_idx"},
		query{"outcomes", distinctQuery("outcome"), nil, "USING COVERING INDEX trace_turn_outcome_idx"},
	)
	for _, qu := range queries {
		lines, err := planLines(t.Context(), s, "EXPLAIN QUERY PLAN "+qu.q, qu.args...)
		if err != nil {
			t.Fatalf("%s: %v", qu.name, err)
		}
		plan := strings.Join(lines, "\n")
		if !strings.Contains(plan, qu.want) || strings.Contains(plan, "TEMP B-TREE FOR ORDER BY") ||
			(qu.want != "SCAN trace_turn" && regexp.MustCompile(`SCAN trace_turn($|\n)`).MatchString(plan)) {
			t.Errorf("%s: plan\n%s\nwant %s, no full scan, no sort", qu.name, plan, qu.want)
		} else {
			t.Logf("%s:\n%s", qu.name, plan)
		}
	}
}
