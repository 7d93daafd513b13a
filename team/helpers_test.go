package team

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// call is one call the fake runner received: its kind ("member", "plan",
// "synthesis"), when it started and ended (time, and a sequence number
// shared by all calls, so order is exact), and what it was given.
type call struct {
	Kind             string
	Agent            hooks.AgentName
	Task             Task
	Lead             LeadRequest
	Depth            int
	Start, End       time.Time
	StartSeq, EndSeq int
	Err              error
}

// fakeRunner records every call. Member and lead answer them; nil gives
// the default answers: a member answers "<agent> says: <question>", a plan
// assigns every member the task "part for <member>", a synthesis is
// "synthesis".
type fakeRunner struct {
	mu     sync.Mutex
	seq    int
	calls  []call
	member func(ctx context.Context, agent hooks.AgentName, task Task) (MemberResult, error)
	lead   func(ctx context.Context, req LeadRequest) (MemberResult, error)
}

var _ Runner = (*fakeRunner)(nil)

func (f *fakeRunner) begin(c call) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	c.StartSeq, c.Start = f.seq, time.Now()
	f.calls = append(f.calls, c)
	return len(f.calls) - 1
}

func (f *fakeRunner) end(i int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	f.calls[i].EndSeq, f.calls[i].End, f.calls[i].Err = f.seq, time.Now(), err
}

func (f *fakeRunner) RunMember(ctx context.Context, agent hooks.AgentName, task Task) (res MemberResult, err error) {
	i := f.begin(call{Kind: "member", Agent: agent, Task: task, Depth: DepthFrom(ctx)})
	defer func() { f.end(i, err) }()
	if f.member != nil {
		return f.member(ctx, agent, task)
	}
	return answer(string(agent) + " says: " + task.Question), nil
}

func (f *fakeRunner) Lead(ctx context.Context, req LeadRequest) (res MemberResult, err error) {
	i := f.begin(call{Kind: string(req.Step), Agent: req.Leader, Lead: req, Depth: DepthFrom(ctx)})
	defer func() { f.end(i, err) }()
	if f.lead != nil {
		return f.lead(ctx, req)
	}
	if req.Step == StepSynthesis {
		return answer("synthesis"), nil
	}
	return answer(`{"assignments": []}`), nil
}

// Calls returns the calls of kind ("" for all), in the order they started.
func (f *fakeRunner) Calls(kind string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if kind == "" || c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

// agentsCalled returns the agents of the member calls, sorted.
func (f *fakeRunner) agentsCalled() []hooks.AgentName {
	var out []hooks.AgentName
	for _, c := range f.Calls("member") {
		out = append(out, c.Agent)
	}
	slices.Sort(out)
	return out
}

// answer is a member's answer with some usage.
func answer(text string) MemberResult {
	return MemberResult{Text: text, Model: "m", Usage: agents.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}, ModelCalls: 1}
}

// barrier lets n goroutines wait until all n arrived, or until a minute
// passed (in a synctest bubble: at once, when nothing else can move).
type barrier struct {
	mu      sync.Mutex
	n, seen int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

// arrive counts the caller in and waits for the others; it reports false
// when they did not all arrive in time (or ctx ended).
func (b *barrier) arrive(ctx context.Context) bool {
	b.mu.Lock()
	b.seen++
	if b.seen == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
		return true
	case <-ctx.Done():
		return false
	case <-time.After(time.Minute):
		return false
	}
}

// recorder is an Observer that records what it is told.
type recorder struct {
	mu     sync.Mutex
	events []string
	ended  []SubagentInfo
}

func (r *recorder) Spawned(_ context.Context, info SubagentInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("spawned %s (%s by %s, depth %d)", info.AgentID, info.Reason, info.Parent, info.SpawnDepth))
}

func (r *recorder) Ended(_ context.Context, info SubagentInfo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("ended %s: %s", info.AgentID, info.Outcome))
	r.ended = append(r.ended, info)
}

func (r *recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := slices.Clone(r.events)
	slices.Sort(out)
	return out
}
