package team

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// DelegateToolName is the name of the delegation tool.
const DelegateToolName = "delegate_to"

// Delegation says who may ask whom with delegate_to, as config.yaml's
// delegation: section declares it, plus each agent's own delegate: list
// (AgentRule). Nobody may delegate unless a rule allows it.
//
//	delegation:
//	  max_depth: 2
//	  rules:
//	    - from: [assistant]
//	      to: [searcher, coder]
//	    - from: ["*"]
//	      to: [searcher]
//	agents:
//	  coder:
//	    delegate: [searcher]     # = a rule from [coder] to [searcher]
type Delegation struct {
	// MaxDepth bounds chains of delegation: a person's turn is depth 0, a
	// run it delegates to depth 1, … A delegation that would run deeper
	// than MaxDepth is refused. 0: DefaultMaxDepth.
	MaxDepth int `yaml:"max_depth"`
	// Rules allow delegation; the first that matches allows it.
	Rules []Rule `yaml:"rules"`
}

// Rule allows every agent of From to delegate to every agent of To. Both
// list agent names or "*" (any agent).
type Rule struct {
	From []string `yaml:"from"`
	To   []string `yaml:"to"`
}

// AgentRule is the rule an agent's own delegate: list stands for.
func AgentRule(agent hooks.AgentName, delegate []string) Rule {
	return Rule{From: []string{string(agent)}, To: slices.Clone(delegate)}
}

// Limit returns the effective MaxDepth.
func (d Delegation) Limit() int { return cmp.Or(d.MaxDepth, DefaultMaxDepth) }

// Allows reports whether from may delegate to to. Nobody delegates to
// itself.
func (d Delegation) Allows(from, to hooks.AgentName) bool {
	if from == to {
		return false
	}
	for _, r := range d.Rules {
		if matches(r.From, from) && matches(r.To, to) {
			return true
		}
	}
	return false
}

func matches(list []string, name hooks.AgentName) bool {
	return slices.Contains(list, "*") || slices.Contains(list, string(name))
}

// Validate checks the rules against the configured agents (known) and
// reports every problem as *FieldError values (paths under delegation.):
// unknown agents, empty lists, a negative max_depth. Rules an agent's
// delegate: list stands for are checked by the configuration loader with
// the agent's path.
func (d Delegation) Validate(known []hooks.AgentName) error {
	var errs []error
	if d.MaxDepth < 0 {
		errs = append(errs, &FieldError{Path: "delegation.max_depth", Msg: fmt.Sprintf("max_depth %d must not be negative", d.MaxDepth)})
	}
	for i, r := range d.Rules {
		p := fmt.Sprintf("delegation.rules[%d]", i)
		errs = append(errs, checkNames(p+".from", r.From, known)...)
		errs = append(errs, checkNames(p+".to", r.To, known)...)
	}
	return errors.Join(errs...)
}

// ValidateList checks one agent's delegate: list (path: its key path).
func ValidateList(path string, list []string, known []hooks.AgentName) error {
	return errors.Join(checkNames(path, list, known)...)
}

func checkNames(path string, list []string, known []hooks.AgentName) []error {
	if len(list) == 0 {
		return []error{&FieldError{Path: path, Msg: `lists no agent (use "*" for any agent)`}}
	}
	var errs []error
	for i, n := range list {
		if n != "*" && !slices.Contains(known, hooks.AgentName(n)) {
			errs = append(errs, &FieldError{Path: fmt.Sprintf("%s[%d]", path, i),
				Msg: fmt.Sprintf("%q is not a configured agent (known: %s)", n, joinNames(known))})
		}
	}
	return errs
}

// RefusedError is a delegation the rules or the depth limit refused; its
// message is what the delegating model reads.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

// Delegator is the delegate_to tool: an agent asks another agent a
// question and gets its answer as the tool result. Add it to the toolset
// of every agent some rule lets delegate. It is safe for concurrent use.
type Delegator struct {
	Rules Delegation
	// Runner runs the asked agent (its RunMember) with that agent's own
	// model, tools, instructions and budget.
	Runner Runner
	// Known reports whether an agent exists (nil: any name is tried).
	Known func(hooks.AgentName) bool
	// Store, when set, records each delegation under the turn's message
	// (its correlation id), so a replayed turn that asks the same agent the
	// same question gets the recorded answer without a second run.
	Store *Store
	// Observer, when set, is told of each delegated run.
	Observer Observer
}

var _ agents.Tool = (*Delegator)(nil)

// delegateArgs are the tool's arguments.
type delegateArgs struct {
	Agent    string `json:"agent"`
	Question string `json:"question"`
}

// Spec describes delegate_to to the model.
func (d *Delegator) Spec() agents.ToolSpec {
	return agents.ToolSpec{
		Name: DelegateToolName,
		Description: "Ask another agent a question and get its answer. The agent works on it alone, with its own tools and knowledge, " +
			"and sees nothing of this conversation but the question: make the question complete on its own.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"agent":{"type":"string","description":"the name of the agent to ask"},` +
			`"question":{"type":"string","description":"the question or task, complete on its own"}},` +
			`"required":["agent","question"],"additionalProperties":false}`),
	}
}

// Call runs one delegate_to call of the agent the tool call is for
// (agents.ToolCallFrom, else hooks.WhereFrom). A refusal is returned as a
// *RefusedError, which the model reads as the failed call's error.
func (d *Delegator) Call(ctx context.Context, raw json.RawMessage) (string, error) {
	var args delegateArgs
	if err := json.Unmarshal(raw, &args); err != nil {
		return "", fmt.Errorf(`the arguments must be {"agent": "<name>", "question": "<text>"}: %w`, err)
	}
	from := hooks.WhereFrom(ctx).Agent
	if tc, ok := agents.ToolCallFrom(ctx); ok && tc.Agent != "" {
		from = tc.Agent
	}
	to := hooks.AgentName(strings.TrimPrefix(strings.TrimSpace(args.Agent), "@"))
	return d.Delegate(ctx, from, to, args.Question)
}

// Delegate asks to the question on behalf of from, at the depth ctx
// carries plus one, and returns its answer. It refuses (a *RefusedError)
// when the rules do not allow it, when the chain is at its depth limit
// (the team's max_depth when under a team, else the rules'), and when to
// is already working on the chain (a cycle).
func (d *Delegator) Delegate(ctx context.Context, from, to hooks.AgentName, question string) (string, error) {
	question = strings.TrimSpace(question)
	switch {
	case to == "":
		return "", &RefusedError{Msg: "delegation needs the name of an agent to ask"}
	case question == "":
		return "", &RefusedError{Msg: "delegation needs a question"}
	case d.Known != nil && !d.Known(to):
		return "", &RefusedError{Msg: fmt.Sprintf("there is no agent called %q", to)}
	case !d.Rules.Allows(from, to):
		return "", &RefusedError{Msg: fmt.Sprintf("delegation to %s is not allowed for %s", to, from)}
	}
	c := chainFrom(ctx)
	limit := d.Rules.Limit()
	if c.limit > 0 {
		limit = c.limit
	}
	if c.depth+1 > limit {
		return "", &RefusedError{Msg: fmt.Sprintf("delegation depth limit %d reached: %s cannot delegate further", limit, from)}
	}
	if slices.Contains(c.path, to) {
		return "", &RefusedError{Msg: fmt.Sprintf("delegation to %s refused: %s is already working on this request", to, to)}
	}
	sub := descend(ctx, from, 0)
	task := Task{From: from, Reason: ReasonDelegation, Question: question, Depth: DepthFrom(sub)}
	event := id.EventID(hooks.CorrelationID(ctx))
	k := Key{SourceEventID: event, Team: from, Member: to, Step: DelegateStep(question)}
	store := d.Store
	var earlier Record
	if store != nil && event != "" {
		rec, ok, err := store.Get(ctx, k)
		if err != nil {
			return "", err
		}
		if ok {
			earlier = rec
		}
	} else {
		store = nil
	}
	info := SubagentInfo{
		RunID: k.String(), AgentID: to, Parent: from, Reason: ReasonDelegation, Task: question,
		SpawnDepth: task.Depth, SourceEventID: event,
	}
	out, _, err := runStep(sub, store, earlier, false, k, question, d.Observer, info, func(ctx context.Context) (MemberResult, error) {
		return d.Runner.RunMember(ctx, to, task)
	})
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("%s could not answer: %w", to, err)
	}
	return cmp.Or(strings.TrimSpace(out.Text), "("+string(to)+" gave an empty answer)"), nil
}

// DelegateStep is the Store step of a delegation of question.
func DelegateStep(question string) Step {
	sum := sha256.Sum256([]byte(strings.TrimSpace(question)))
	return Step("delegate-" + hex.EncodeToString(sum[:8]))
}
