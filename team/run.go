package team

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// Runner runs the model calls of a team run; the turn implements it.
// Its methods are called concurrently (members run in parallel) and must
// honour ctx: when it ends, they return promptly with its error.
type Runner interface {
	// RunMember runs member as a sub-agent: its own model, tools,
	// instructions and budget, asked task.Question (with the conversation
	// the turn decides to give it). It returns the member's answer and what
	// its model calls used; a failed run returns an error, and what it used
	// before failing in the result. ctx carries the member's delegation
	// depth (DepthFrom), which the turn passes on to its tool loop.
	RunMember(ctx context.Context, member hooks.AgentName, task Task) (MemberResult, error)
	// Lead makes one call of the leader's model, without tools: the
	// coordinate plan (req.Step StepPlan, answered with JSON matching
	// req.Schema) and the synthesis (StepSynthesis). The system prompt is
	// the leader's persona (a member's, or the team's own for Leader "")
	// followed by req.System; the user message is req.Prompt.
	Lead(ctx context.Context, req LeadRequest) (MemberResult, error)
}

// Task is what a member (or a delegated agent) is asked.
type Task struct {
	// Team is the team it answers for ("" for a delegation).
	Team hooks.AgentName
	// From is who asks: the team's leader, or the delegating agent.
	From   hooks.AgentName
	Reason Reason
	// Question is what it is asked: the person's message (collaborate),
	// the leader's task for it (coordinate) or the delegated question.
	Question string
	// Original is the person's message the team run answers ("" for a
	// delegation).
	Original string
	// Depth is its delegation depth (DepthFrom of the ctx it runs in).
	Depth int
}

// LeadRequest is one call of a team leader's model.
type LeadRequest struct {
	Team hooks.AgentName
	// Leader is the leading member, or "" for the team's own model.
	Leader hooks.AgentName
	Step   Step // StepPlan or StepSynthesis
	// System goes after the leader's persona in the system prompt.
	System string
	// Prompt is the user message.
	Prompt string
	// Schema, for the plan, asks for structured output (providers that
	// cannot are told in System and Prompt anyway; ParsePlan is lenient).
	Schema *agents.ResponseSchema
}

// MemberResult is what one model run produced.
type MemberResult struct {
	Text string
	// Model is the provider's model id; Usage and ModelCalls what the run
	// used, summed over its model calls.
	Model      string
	Usage      agents.Usage
	ModelCalls int
}

// Plan is one team run: the team, the message it answers and where its
// steps are recorded.
type Plan struct {
	Team Definition
	// SourceEventID is the message the turn answers; with Store, it keys
	// the run's recorded steps.
	SourceEventID id.EventID
	// Question is the person's (enriched) message.
	Question string
	// Roles describe the members to a coordinating leader (one line each;
	// optional).
	Roles map[hooks.AgentName]string
	// Store, when set, records every step and lets a replay reuse those
	// that completed.
	Store *Store
	// Observer, when set, is told of every member run (subagent events).
	Observer Observer
	// OnContribution, when set, is called once per member with its
	// contribution as soon as it is known (answered, failed, or reused
	// from the Store), one call at a time: the turn posts it as a separate
	// message (ShowSeparate) with a transaction key of its own, so that a
	// replay's second call edits instead of posting again.
	OnContribution func(ctx context.Context, c Contribution)
}

// Assignment is one member's task in a team run.
type Assignment struct {
	Member hooks.AgentName `json:"member"`
	Task   string          `json:"task"`
}

// Contribution is one member's part of a team run.
type Contribution struct {
	Member hooks.AgentName
	Task   string
	// Text is the member's answer; Err says why there is none ("" when it
	// answered).
	Text string
	Err  string
	MemberResult
	// Reused: taken from the Store (a replay), not run again.
	Reused   bool
	Duration time.Duration
}

// Failed reports whether the member did not answer.
func (c Contribution) Failed() bool { return c.Err != "" }

// Result is a team run's outcome.
type Result struct {
	Team   hooks.AgentName
	Mode   Mode
	Leader hooks.AgentName // LeaderName
	// Assignments are the tasks the members were given, in member order.
	Assignments []Assignment
	// PlanNote says why a coordinate run asked every member the question
	// instead of following the leader's plan ("" when it followed it).
	PlanNote string
	// Contributions are the members' parts, in the order of Assignments.
	Contributions []Contribution
	// Synthesis is the leader's reply.
	Synthesis string
	// Plan and Synth are what the leader's calls used.
	PlanUsage, SynthUsage MemberResult
	// Reused counts the steps taken from the Store.
	Reused int
}

// Targets returns the members the run addressed.
func (r Result) Targets() []hooks.AgentName {
	out := make([]hooks.AgentName, len(r.Assignments))
	for i, a := range r.Assignments {
		out[i] = a.Member
	}
	return out
}

// AgentUsage is what one agent used in a team run.
type AgentUsage struct {
	Agent      hooks.AgentName
	Model      string
	Usage      agents.Usage
	ModelCalls int
}

// UsageByAgent sums the run's usage per agent, in order of first use: the
// leader's calls count against the leader (the team itself for the team's
// own model), each member's against the member. The turn records one
// usage row per entry, so budgets count each member's tokens against that
// member and the person. Reused steps count too: their tokens were spent,
// and nothing was recorded for them before the crash.
func (r Result) UsageByAgent() []AgentUsage {
	var out []AgentUsage
	add := func(agent hooks.AgentName, m MemberResult) {
		if m.ModelCalls == 0 && m.Usage == (agents.Usage{}) {
			return
		}
		i := slices.IndexFunc(out, func(a AgentUsage) bool { return a.Agent == agent })
		if i < 0 {
			out = append(out, AgentUsage{Agent: agent, Model: m.Model})
			i = len(out) - 1
		}
		a := &out[i]
		a.Model = cmp.Or(a.Model, m.Model)
		a.ModelCalls += m.ModelCalls
		a.Usage.PromptTokens += m.Usage.PromptTokens
		a.Usage.CompletionTokens += m.Usage.CompletionTokens
		a.Usage.CachedTokens += m.Usage.CachedTokens
		a.Usage.TotalTokens += m.Usage.TotalTokens
	}
	add(r.Leader, r.PlanUsage)
	for _, c := range r.Contributions {
		add(c.Member, c.MemberResult)
	}
	add(r.Leader, r.SynthUsage)
	return out
}

// MembersFailedError is Run's error when no member answered: there is
// nothing to synthesise. It unwraps to the members' errors.
type MembersFailedError struct {
	Team hooks.AgentName
	Errs []error
}

func (e *MembersFailedError) Error() string {
	return fmt.Sprintf("no member of team %s could answer: %v", e.Team, errors.Join(e.Errs...))
}

func (e *MembersFailedError) Unwrap() []error { return e.Errs }

// Run carries one team run: for coordinate the leader's plan, then the
// members it asks (in parallel), then the leader's synthesis of their
// answers; for collaborate every member in parallel, then the synthesis.
// A member that fails is recorded as such and the synthesis is told; when
// every member fails Run returns a *MembersFailedError.
//
// When ctx ends Run returns promptly with its cause: every member's
// context ends with it, and no model call starts after. With p.Store, each
// step is recorded before and after it runs: a replay of the same message
// reuses the steps that completed (the plan, answers, the synthesis) and
// runs again only those interrupted or failed, so one synthesis is
// produced, however often the run is replayed.
func Run(ctx context.Context, p Plan, r Runner) (Result, error) {
	def := p.Team.WithDefaults()
	res := Result{Team: def.Name, Mode: def.Mode, Leader: def.LeaderName()}
	if len(def.Members) == 0 {
		return res, fmt.Errorf("failed to run team %s: it has no members", def.Name)
	}
	if def.Mode != ModeCoordinate && def.Mode != ModeCollaborate {
		return res, fmt.Errorf("failed to run team %s: unknown mode %q", def.Name, def.Mode)
	}
	if p.Store != nil && p.SourceEventID == "" {
		return res, fmt.Errorf("failed to run team %s: a recorded run needs its source event", def.Name)
	}
	tr := &teamRun{p: p, def: def, r: r, res: &res, stored: map[Key]Record{}}
	if p.Store != nil {
		recs, err := p.Store.List(ctx, p.SourceEventID, def.Name)
		if err != nil {
			return res, fmt.Errorf("failed to run team %s: %w", def.Name, err)
		}
		for _, rec := range recs {
			tr.stored[rec.Key] = rec
		}
	}

	// Who is asked what.
	res.Assignments = everyone(def.Members, p.Question)
	if def.Mode == ModeCoordinate {
		if err := tr.plan(ctx); err != nil {
			return res, err
		}
	}

	// The members, in parallel.
	res.Contributions = make([]Contribution, len(res.Assignments))
	memberCtx := descend(ctx, def.Name, def.MaxDepth)
	var wg sync.WaitGroup
	for i, a := range res.Assignments {
		wg.Go(func() { res.Contributions[i] = tr.member(memberCtx, a) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return res, fmt.Errorf("team %s stopped: %w", def.Name, context.Cause(ctx))
	}
	var errs []error
	for _, c := range res.Contributions {
		if c.Failed() {
			errs = append(errs, fmt.Errorf("%s: %s", c.Member, c.Err))
		}
		if c.Reused {
			res.Reused++
		}
	}
	if len(errs) == len(res.Contributions) {
		return res, &MembersFailedError{Team: def.Name, Errs: errs}
	}

	// The synthesis.
	req := LeadRequest{
		Team: def.Name, Leader: def.Leader, Step: StepSynthesis,
		System: SynthesisSystem(def), Prompt: SynthesisPrompt(p.Question, res.Contributions),
	}
	out, reused, err := tr.step(ctx, Key{Member: res.Leader, Step: StepSynthesis}, req.Prompt, func(ctx context.Context) (MemberResult, error) {
		return r.Lead(ctx, req)
	})
	res.SynthUsage = out.MemberResult
	if reused {
		res.Reused++
	}
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("team %s stopped: %w", def.Name, context.Cause(ctx))
		}
		return res, fmt.Errorf("failed to synthesise the answer of team %s: %w", def.Name, err)
	}
	res.Synthesis = out.Text
	return res, nil
}

// teamRun is the state of one Run.
type teamRun struct {
	p      Plan
	def    Definition
	r      Runner
	res    *Result
	stored map[Key]Record // the steps recorded before this run (replays)

	mu sync.Mutex // serialises OnContribution
}

// plan asks the leader whom to ask what, and sets res.Assignments; a
// failed call or a plan without a usable assignment falls back to asking
// every member the question.
func (tr *teamRun) plan(ctx context.Context) error {
	req := LeadRequest{
		Team: tr.def.Name, Leader: tr.def.Leader, Step: StepPlan,
		System: PlanSystem(tr.def, tr.p.Roles), Prompt: PlanPrompt(tr.p.Question), Schema: PlanSchema(),
	}
	out, reused, err := tr.step(ctx, Key{Member: tr.res.Leader, Step: StepPlan}, req.Prompt, func(ctx context.Context) (MemberResult, error) {
		return tr.r.Lead(ctx, req)
	})
	tr.res.PlanUsage = out.MemberResult
	if reused {
		tr.res.Reused++
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("team %s stopped: %w", tr.def.Name, context.Cause(ctx))
		}
		tr.res.PlanNote = "the leader could not plan (" + err.Error() + "); every member was asked"
		return nil
	}
	as, err := ParsePlan(out.Text, tr.def.Members, tr.p.Question)
	if err != nil {
		tr.res.PlanNote = "the leader's plan was unusable (" + err.Error() + "); every member was asked"
		return nil
	}
	tr.res.Assignments = as
	return nil
}

// member runs one member's assignment (or reuses its recorded answer) and
// hands the contribution to OnContribution.
func (tr *teamRun) member(ctx context.Context, a Assignment) Contribution {
	c := Contribution{Member: a.Member, Task: a.Task}
	k := Key{Member: a.Member, Step: StepAnswer}
	task := Task{
		Team: tr.def.Name, From: tr.res.Leader, Reason: ReasonMember,
		Question: a.Task, Original: tr.p.Question, Depth: DepthFrom(ctx),
	}
	out, reused, err := tr.step(ctx, k, a.Task, func(ctx context.Context) (MemberResult, error) {
		return tr.r.RunMember(ctx, a.Member, task)
	})
	c.MemberResult, c.Reused, c.Duration = out.MemberResult, reused, out.duration
	if err != nil {
		if ctx.Err() != nil {
			return c // stopped: nothing to show
		}
		c.Err = err.Error()
	} else {
		c.Text = out.Text
	}
	if tr.p.OnContribution != nil {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.p.OnContribution(ctx, c)
	}
	return c
}

// stepOutcome is what step returns: the result and how long it took.
type stepOutcome struct {
	MemberResult
	duration time.Duration
}

// step runs one step of the run (k's Member and Step; the rest is filled
// in) unless the Store has it done: then it returns the recorded answer
// and reused. It starts no call once ctx ended. With a Store, the step is
// recorded as running before the call and as done or failed after it; a
// step cut short by ctx stays running, to run again on a replay. Member
// steps are reported to the Observer.
func (tr *teamRun) step(ctx context.Context, k Key, task string, call func(context.Context) (MemberResult, error)) (stepOutcome, bool, error) {
	k.SourceEventID, k.Team = tr.p.SourceEventID, tr.def.Name
	var obs Observer
	if k.Step == StepAnswer {
		obs = tr.p.Observer
	}
	info := SubagentInfo{
		RunID: k.String(), AgentID: k.Member, Parent: tr.def.Name, Team: tr.def.Name,
		Reason: ReasonMember, Task: task, SpawnDepth: DepthFrom(ctx), SourceEventID: tr.p.SourceEventID,
	}
	earlier := tr.stored[k]
	// A failed step runs again on a replay, unless what followed it was
	// built on the failure: a failed plan (the members were asked its
	// fallback), or any failure once the synthesis is done (it was told).
	final := earlier.Status == StatusFailed && (k.Step == StepPlan || tr.synthesised())
	return runStep(ctx, tr.p.Store, earlier, final, k, task, obs, info, call)
}

// synthesised reports whether the Store had the synthesis done when the run
// began.
func (tr *teamRun) synthesised() bool {
	k := Key{SourceEventID: tr.p.SourceEventID, Team: tr.def.Name, Member: tr.res.Leader, Step: StepSynthesis}
	return tr.stored[k].Status == StatusDone
}

// runStep is step without a team: Run's steps and delegations. earlier is
// the step as the Store had it; done, it is reused, and so is a failure
// when final.
func runStep(ctx context.Context, store *Store, earlier Record, final bool, k Key, task string, obs Observer, info SubagentInfo,
	call func(context.Context) (MemberResult, error)) (stepOutcome, bool, error) {
	switch {
	case earlier.Status == StatusDone:
		return stepOutcome{MemberResult: earlier.result(), duration: earlier.EndedAt.Sub(earlier.StartedAt)}, true, nil
	case earlier.Status == StatusFailed && final:
		return stepOutcome{MemberResult: earlier.result(), duration: earlier.EndedAt.Sub(earlier.StartedAt)}, true, errors.New(earlier.Error)
	}
	if err := ctx.Err(); err != nil {
		return stepOutcome{}, false, context.Cause(ctx)
	}
	if store != nil {
		done, err := store.Begin(ctx, k, task)
		if err != nil {
			return stepOutcome{}, false, err
		}
		if done { // finished since the run listed its steps
			rec, ok, err := store.Get(ctx, k)
			if err != nil || !ok {
				return stepOutcome{}, false, cmp.Or(err, fmt.Errorf("failed to read %s", k))
			}
			return stepOutcome{MemberResult: rec.result(), duration: rec.EndedAt.Sub(rec.StartedAt)}, true, nil
		}
	}
	start := time.Now()
	info.StartedAt = start
	if obs != nil {
		obs.Spawned(ctx, info)
	}
	out, err := call(ctx)
	end := time.Now()
	if obs != nil {
		info.EndedAt, info.DurationMS = end, end.Sub(start).Milliseconds()
		info.Usage = tokenUsage(out)
		switch {
		case err == nil:
			info.Outcome = OutcomeOK
		case ctx.Err() != nil:
			info.Outcome, info.Error = OutcomeKilled, context.Cause(ctx).Error()
		case errors.Is(err, context.DeadlineExceeded):
			info.Outcome, info.Error = OutcomeTimeout, err.Error()
		default:
			info.Outcome, info.Error = OutcomeError, err.Error()
		}
		defer obs.Ended(context.WithoutCancel(ctx), info)
	}
	o := stepOutcome{MemberResult: out, duration: end.Sub(start)}
	if err != nil && ctx.Err() != nil {
		// Cut short: left running, to run again after a restart (a
		// stopped turn is not replayed).
		return o, false, err
	}
	if store == nil {
		return o, false, err
	}
	rec := Record{Key: k, Task: task, Text: out.Text, Model: out.Model, Usage: out.Usage, ModelCalls: out.ModelCalls,
		StartedAt: start, EndedAt: end, Status: StatusDone}
	if err != nil {
		rec.Status, rec.Text, rec.Error = StatusFailed, "", err.Error()
	}
	stored, ferr := store.Finish(context.WithoutCancel(ctx), rec)
	if ferr != nil {
		// The answer stands; only its record is lost (a replay would ask
		// again).
		zerolog.Ctx(ctx).Error().Err(ferr).Str("step", k.String()).Msg("failed to record a team step")
		return o, false, err
	}
	if err == nil && stored.Text != out.Text {
		// Another run finished the step first: its answer is the one.
		return stepOutcome{MemberResult: stored.result(), duration: o.duration}, true, nil
	}
	return o, false, err
}

// result is the recorded step as a MemberResult.
func (r Record) result() MemberResult {
	return MemberResult{Text: r.Text, Model: r.Model, Usage: r.Usage, ModelCalls: r.ModelCalls}
}

// everyone assigns the question to every member.
func everyone(members []hooks.AgentName, question string) []Assignment {
	out := make([]Assignment, len(members))
	for i, m := range members {
		out[i] = Assignment{Member: m, Task: question}
	}
	return out
}
