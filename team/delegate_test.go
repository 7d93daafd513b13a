package team

import (
	"context"
	"errors"
	"strings"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

var known = []hooks.AgentName{"assistant", "searcher", "coder", "critic"}

func isKnown(n hooks.AgentName) bool {
	for _, k := range known {
		if k == n {
			return true
		}
	}
	return false
}

func TestDelegateRefusesVisibly(t *testing.T) {
	rules := Delegation{Rules: []Rule{
		{From: []string{"assistant"}, To: []string{"searcher", "coder"}},
		{From: []string{"*"}, To: []string{"critic"}},
		AgentRule("coder", []string{"*"}),
	}}
	bg := context.Background()
	cases := []struct {
		name     string
		ctx      context.Context
		from, to hooks.AgentName
		question string
		refused  string // "" allowed
	}{
		{"allowed", bg, "assistant", "searcher", "Find X", ""},
		{"allowed by a wildcard from", bg, "searcher", "critic", "Check X", ""},
		{"allowed by the agent's own list", bg, "coder", "assistant", "Explain X", ""},
		{"not allowed", bg, "searcher", "coder", "Write X", "delegation to coder is not allowed for searcher"},
		{"not to itself", bg, "coder", "coder", "X", "delegation to coder is not allowed for coder"},
		{"unknown agent", bg, "assistant", "oracle", "X", `there is no agent called "oracle"`},
		{"no question", bg, "assistant", "searcher", "  ", "needs a question"},
		{"no agent", bg, "assistant", "", "X", "needs the name of an agent"},
		{"depth limit", WithDepth(bg, 2), "assistant", "searcher", "X", "delegation depth limit 2 reached: assistant cannot delegate further"},
		{"just under the limit", WithDepth(bg, 1), "assistant", "searcher", "X", ""},
		{"a team's limit", descend(bg, "research", 1), "assistant", "searcher", "X", "delegation depth limit 1 reached"},
		{"a cycle", descend(bg, "searcher", 0), "assistant", "searcher", "X", "delegation to searcher refused: searcher is already working on this request"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeRunner{}
			d := &Delegator{Rules: rules, Runner: f, Known: isKnown}
			out, err := d.Delegate(tc.ctx, tc.from, tc.to, tc.question)
			if tc.refused != "" {
				var re *RefusedError
				if !errors.As(err, &re) || !strings.Contains(re.Msg, tc.refused) {
					t.Errorf("Delegate = %q, %v; want refused with %q", out, err, tc.refused)
				}
				if n := len(f.Calls("")); n != 0 {
					t.Errorf("a refused delegation ran %d calls", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			calls := f.Calls("member")
			if len(calls) != 1 || calls[0].Agent != tc.to || calls[0].Task.Reason != ReasonDelegation || calls[0].Task.From != tc.from ||
				calls[0].Depth != DepthFrom(tc.ctx)+1 || calls[0].Task.Depth != calls[0].Depth {
				t.Errorf("calls = %+v", calls)
			}
			if want := string(tc.to) + " says: " + strings.TrimSpace(tc.question); out != want {
				t.Errorf("answer = %q, want %q", out, want)
			}
		})
	}
}

// TestDelegationChain: each delegated agent delegates on, until the depth
// limit refuses; every level reads the answer of the one below.
func TestDelegationChain(t *testing.T) {
	d := &Delegator{Rules: Delegation{MaxDepth: 2, Rules: []Rule{{From: []string{"*"}, To: []string{"*"}}}}}
	chain := map[hooks.AgentName]hooks.AgentName{"assistant": "searcher", "searcher": "coder", "coder": "critic"}
	f := &fakeRunner{}
	f.member = func(ctx context.Context, agent hooks.AgentName, task Task) (MemberResult, error) {
		next := chain[agent]
		out, err := d.Delegate(ctx, agent, next, "deeper")
		if err != nil {
			return answer(string(agent) + " was refused: " + err.Error()), nil
		}
		return answer(string(agent) + " heard: " + out), nil
	}
	d.Runner = f
	rec := &recorder{}
	d.Observer = rec
	out, err := d.Delegate(context.Background(), "assistant", "searcher", "start")
	if err != nil {
		t.Fatal(err)
	}
	want := "searcher heard: coder was refused: delegation depth limit 2 reached: coder cannot delegate further"
	if out != want {
		t.Errorf("answer = %q, want %q", out, want)
	}
	if got := rec.Events(); len(got) != 4 || got[2] != "spawned coder (delegation by searcher, depth 2)" {
		t.Errorf("observer = %q", got)
	}
}

func TestDelegateTool(t *testing.T) {
	f := &fakeRunner{}
	d := &Delegator{Rules: Delegation{Rules: []Rule{AgentRule("assistant", []string{"searcher"})}}, Runner: f}
	if err := agents.ValidateToolSpec(d.Spec()); err != nil || d.Spec().Name != "delegate_to" {
		t.Fatalf("spec %+v: %v", d.Spec(), err)
	}
	if _, err := agents.NewToolset(d); err != nil {
		t.Fatal(err)
	}
	ctx := hooks.WithWhere(context.Background(), hooks.Where{Agent: "assistant"})
	out, err := d.Call(ctx, []byte(`{"agent": "@searcher", "question": "Find X"}`))
	if err != nil || out != "searcher says: Find X" {
		t.Errorf("Call = %q, %v", out, err)
	}
	ctx = hooks.WithWhere(context.Background(), hooks.Where{Agent: "searcher"})
	if _, err := d.Call(ctx, []byte(`{"agent": "assistant", "question": "Find X"}`)); err == nil || err.Error() != "delegation to assistant is not allowed for searcher" {
		t.Errorf("Call from searcher = %v", err)
	}
	if _, err := d.Call(ctx, []byte(`[1]`)); err == nil {
		t.Error("Call with bad arguments succeeded")
	}
	f.member = func(context.Context, hooks.AgentName, Task) (MemberResult, error) {
		return MemberResult{}, errors.New("model down")
	}
	ctx = hooks.WithWhere(context.Background(), hooks.Where{Agent: "assistant"})
	if _, err := d.Call(ctx, []byte(`{"agent": "searcher", "question": "Find X"}`)); err == nil || err.Error() != "searcher could not answer: model down" {
		t.Errorf("Call of a failing agent = %v", err)
	}
}

func TestDelegationIsDurable(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		f := &fakeRunner{}
		d := &Delegator{Rules: Delegation{Rules: []Rule{{From: []string{"*"}, To: []string{"*"}}}}, Runner: f, Store: s}
		ctx := hooks.WithCorrelationID(t.Context(), "$msg")
		for range 2 { // the turn, and its replay
			out, err := d.Delegate(ctx, "assistant", "searcher", "Find X")
			if err != nil || out != "searcher says: Find X" {
				t.Fatalf("Delegate = %q, %v", out, err)
			}
		}
		if n := len(f.Calls("member")); n != 1 {
			t.Errorf("searcher ran %d times, want once", n)
		}
		if _, err := d.Delegate(ctx, "assistant", "searcher", "Find Y"); err != nil {
			t.Fatal(err)
		}
		if n := len(f.Calls("member")); n != 2 {
			t.Errorf("a new question ran %d times in all, want 2", n)
		}
		if u, err := s.Usage(t.Context(), "$msg"); err != nil || len(u) != 1 || u[0].Agent != "searcher" || u[0].ModelCalls != 2 {
			t.Errorf("Usage = %+v, %v", u, err)
		}
	})
}

func TestDelegationValidate(t *testing.T) {
	d := Delegation{MaxDepth: -1, Rules: []Rule{
		{From: []string{"assistant"}, To: []string{"*"}},
		{From: []string{"nobody"}, To: nil},
	}}
	err := d.Validate(known)
	for _, want := range []string{
		"delegation.max_depth: max_depth -1 must not be negative",
		`delegation.rules[1].from[0]: "nobody" is not a configured agent (known: assistant, coder, critic, searcher)`,
		`delegation.rules[1].to: lists no agent (use "*" for any agent)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v; want %q", err, want)
		}
	}
	if err := (Delegation{Rules: []Rule{{From: []string{"*"}, To: []string{"coder"}}}}).Validate(known); err != nil {
		t.Errorf("valid rules: %v", err)
	}
	if err := ValidateList("agents.coder.delegate", []string{"searcher", "ghost"}, known); err == nil ||
		err.Error() != `agents.coder.delegate[1]: "ghost" is not a configured agent (known: assistant, coder, critic, searcher)` {
		t.Errorf("ValidateList = %v", err)
	}
	if got := (Delegation{}).Limit(); got != DefaultMaxDepth {
		t.Errorf("default limit = %d", got)
	}
}
