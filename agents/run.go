package agents

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

// Defaults of RunRequest.
const (
	DefaultMaxToolIterations = 8
	DefaultToolTimeout       = 60 * time.Second
)

// StepSeparator is streamed between the texts of two model calls of one
// turn (text before a tool call, then the answer after it), so that the
// streamed text and RunResult.Text read as paragraphs.
const StepSeparator = "\n\n"

// RunRequest is one turn of an agent: the prompt, the tools, where the turn
// happens (for hooks and tools) and where the text streams to.
type RunRequest struct {
	Model Model
	// ModelName is Model's name in config.yaml and ProviderModel the model
	// its provider is asked for: what model:request and model:response
	// hooks are told.
	ModelName     string
	ProviderModel string
	// Messages is the whole prompt: system prompt, history and the new
	// user turn. Run does not modify it.
	Messages []Message
	// Tools the model may call (nil: none).
	Tools       *Toolset
	MaxTokens   int
	Temperature *float32

	// Hooks is the registry snapshot the loop's events are emitted on:
	// model:request and model:response around every model call,
	// tool:before_call, tool:after_call and tool:result around every tool
	// call (nil: no hooks). Load it once per turn. Where the turn
	// happens (agent, room, thread, requester, session: hooks.WithWhere)
	// and its correlation id (hooks.WithCorrelationID) come from Run's
	// context.
	Hooks *hooks.Registry

	// OnText receives the reply's text as it streams, on Run's goroutine;
	// between the texts of two model calls it receives StepSeparator. The
	// deltas concatenated equal RunResult.Text. It must return quickly
	// (throttle edits elsewhere).
	OnText func(delta string)
	// OnToolCall, if set, is called after each tool call (also declined and
	// failed ones) with its trace entry, on Run's goroutine.
	OnToolCall func(hooks.ToolTraceEntry)

	// NeedsApproval, if set, says whether a call needs a person's approval
	// by the operator's rules (tool_approval) and why. It is asked before
	// the tool:before_call gates, which see the answer and may ask for
	// approval too (ToolBeforeCallContext.RequireApproval).
	NeedsApproval func(call hooks.ToolCall) (required bool, reason string)
	// Approve decides a call that needs approval, after the gates allowed
	// it: it blocks until a person (or a tool:approval_requested hook)
	// decides or the deadline passes, and returns whether the call may run
	// and a reason the model sees when it may not. Its error ends the turn
	// (use it only when ctx ended). A call that needs approval while
	// Approve is nil is denied: approval fails closed.
	Approve func(ctx context.Context, req ApprovalRequest) (approved bool, reason string, err error)

	// MaxToolIterations bounds how many rounds of tool calls one turn may
	// make (default DefaultMaxToolIterations); a model that asks for more
	// ends the turn with ErrToolIterations.
	MaxToolIterations int
	// ToolTimeout bounds each tool call (default DefaultToolTimeout). A tool
	// that ignores it is abandoned; the model is told it timed out.
	ToolTimeout time.Duration
}

// RunResult is what a turn produced.
type RunResult struct {
	// Text is every text the model streamed this turn, joined by
	// StepSeparator: what OnText received.
	Text string
	// Messages are the messages this turn added after the prompt, in order:
	// assistant messages (with tool calls), tool results, and last the final
	// assistant message. Store them (after the user turn) as the turn's
	// history. A caller that stores a transformed reply replaces the
	// Content of the last message.
	Messages []Message
	// ToolTrace has one entry per tool call, in order.
	ToolTrace []hooks.ToolTraceEntry
	// Usage sums what the server reported for every model call.
	Usage Usage
	// FinishReason is the last model call's.
	FinishReason FinishReason
	// ModelCalls counts the model calls of the turn.
	ModelCalls int
}

// ApprovalRequest is a call waiting for a person's approval.
type ApprovalRequest struct {
	Call hooks.ToolCall
	// CallID is the model's id of the call.
	CallID string
	// Reason says why the call needs approval (the rule's or the hook's).
	Reason string
}

// DeniedResult is what the model sees for a call a person (or a hook, or
// the deadline) did not approve.
func DeniedResult(tool, reason string) string {
	if strings.TrimSpace(reason) == "" {
		reason = "no reason given"
	}
	return "[tool call denied]\nTool: " + tool + "\nThe call needed a person's approval and was not approved.\nReason: " + reason +
		"\n\nDo not retry the same call unless the person asks; tell them what you could not do."
}

// DeclinedResult is what the model sees for a call a tool:before_call hook
// declined.
func DeclinedResult(tool, reason string) string {
	if strings.TrimSpace(reason) == "" {
		reason = "no reason given"
	}
	return "[tool call declined]\nTool: " + tool + "\nReason: " + reason + "\n\nTry a different approach."
}

// toolErrorResult is what the model sees for a call that failed.
func toolErrorResult(tool, msg string) string {
	return "[tool call failed]\nTool: " + tool + "\nError: " + msg
}

// emptyToolResult replaces an empty tool result in the message to the model
// (servers reject tool messages without content); the trace keeps "".
const emptyToolResult = "(the tool returned no output)"

// Run runs one turn: it streams the model's reply to OnText and, while the
// model asks for tools, runs them and calls the model again with the
// results. Every model call is preceded by model:request (whose hooks may
// change what is sent, or refuse the call) and followed by model:response.
// Each tool call passes the tool:before_call gates first (a declined call
// is not run; the model gets DeclinedResult) and is followed by
// tool:after_call, then tool:result (whose hooks may replace what the
// model and RunResult.Messages get). Unknown tools, invalid arguments and
// tool errors are answered to the model, not treated as failures.
//
// Run fails on a model error (a *ModelError, see errors.As), when a
// model:request hook refused a call (a *RefusedError, errors.Is
// ErrRequestRefused), when ctx ends, and when the model still asks for
// tools after MaxToolIterations rounds (ErrToolIterations). The result is never nil: on failure it holds what
// the turn did before (for logs and hooks; its Messages are not a complete
// turn and should not be stored as one).
func Run(ctx context.Context, req RunRequest) (*RunResult, error) {
	res := &RunResult{}
	if req.Model == nil {
		return res, errors.New("failed to run turn: no model")
	}
	r := runner{req: req, res: res, maxIter: cmp.Or(req.MaxToolIterations, DefaultMaxToolIterations),
		toolTimeout: cmp.Or(req.ToolTimeout, DefaultToolTimeout)}
	if r.maxIter < 0 {
		r.maxIter = 0
	}
	return res, r.run(ctx)
}

type runner struct {
	req         RunRequest
	res         *RunResult
	maxIter     int
	toolTimeout time.Duration

	text      strings.Builder
	stepBegun bool
	// offered names the tools this round's call offered when
	// model:request hooks changed them (nil: the Toolset's).
	offered map[string]bool
}

func (r *runner) onText(delta string) {
	if delta == "" {
		return
	}
	if !r.stepBegun && r.text.Len() > 0 {
		r.emit(StepSeparator)
	}
	r.stepBegun = true
	r.emit(delta)
}

func (r *runner) emit(s string) {
	r.text.WriteString(s)
	if r.req.OnText != nil {
		r.req.OnText(s)
	}
}

func (r *runner) run(ctx context.Context) error {
	defer func() { r.res.Text = r.text.String() }()
	msgs := slices.Clip(r.req.Messages)
	specs := r.req.Tools.Specs()
	for round := 0; ; round++ {
		r.stepBegun = false
		mreq := &Request{Messages: msgs, Tools: specs, MaxTokens: r.req.MaxTokens, Temperature: r.req.Temperature}
		if hooks.Subscribed(r.req.Hooks, hooks.ModelRequest) {
			if err := r.request(ctx, mreq, round+1); err != nil {
				return err
			}
		}
		observed := hooks.Subscribed(r.req.Hooks, hooks.ModelResponse)
		var start time.Time
		if observed {
			start = time.Now()
		}
		comp, err := Complete(ctx, r.req.Model, mreq, r.onText)
		r.res.ModelCalls++
		if observed {
			r.response(ctx, round+1, comp, err, time.Since(start))
		}
		if err != nil {
			return fmt.Errorf("failed to get a reply from the model: %w", err)
		}
		r.res.Usage.Add(comp.Usage)
		r.res.FinishReason = comp.FinishReason
		am := Message{Role: RoleAssistant, Content: comp.Text, ToolCalls: comp.ToolCalls}
		msgs = append(msgs, am)
		r.res.Messages = append(r.res.Messages, am)
		if len(comp.ToolCalls) == 0 {
			return nil
		}
		if round >= r.maxIter {
			return fmt.Errorf("failed to finish the turn: the model still asked for tools after %d rounds of tool calls: %w", r.maxIter, ErrToolIterations)
		}
		for _, tc := range comp.ToolCalls {
			content, err := r.call(ctx, tc)
			if err != nil {
				return err
			}
			tm := Message{Role: RoleTool, Content: content, ToolCallID: tc.ID}
			msgs = append(msgs, tm)
			r.res.Messages = append(r.res.Messages, tm)
		}
	}
}

// call runs one tool call through the gates and returns what the model
// gets to see. Only the end of ctx is an error.
func (r *runner) call(ctx context.Context, tc ToolCall) (string, error) {
	log := zerolog.Ctx(ctx)
	where := hooks.WhereFrom(ctx)
	hc := hooks.ToolCall{
		Tool: tc.Name, Agent: where.Agent, RoomID: where.RoomID, ThreadID: where.ThreadID,
		RequesterID: where.RequesterID, SessionID: where.SessionID,
	}
	entry := hooks.ToolTraceEntry{Tool: tc.Name}
	var content string
	args, argsOK := toolArguments(tc.Arguments)
	hc.Arguments, entry.Args = args, args
	tool, known := r.req.Tools.Get(tc.Name)
	if r.offered != nil && !r.offered[tc.Name] {
		known = false // a model:request hook did not offer it
	}
	switch {
	case !known:
		entry.Error = "unknown tool"
		content = toolErrorResult(tc.Name, fmt.Sprintf("there is no tool called %q. Available tools: %s.", tc.Name, r.availableTools()))
	case !argsOK:
		entry.Error = "invalid arguments: not a JSON object"
		content = toolErrorResult(tc.Name, "the arguments are not a valid JSON object; call the tool again with a JSON object that matches its parameters.")
	default:
		var needs bool
		var needsReason string
		if r.req.NeedsApproval != nil {
			needs, needsReason = r.req.NeedsApproval(hc)
		}
		g, err := r.gate(ctx, hc, needs, needsReason)
		if err != nil {
			return "", err
		}
		if g.declined {
			entry.Blocked = true
			entry.Error = "declined: " + g.reason
			content = DeclinedResult(tc.Name, g.reason)
			break
		}
		if g.needsApproval {
			approved, reason, err := r.approve(ctx, ApprovalRequest{Call: hc, CallID: tc.ID, Reason: g.approvalReason})
			if err != nil {
				return "", err
			}
			if !approved {
				entry.Blocked = true
				entry.Error = "denied: " + reason
				content = DeniedResult(tc.Name, reason)
				break
			}
		}
		start := time.Now()
		out, err := r.invoke(ctx, tool, hc)
		entry.Duration = time.Since(start)
		if ctx.Err() != nil {
			return "", fmt.Errorf("failed to finish the turn during tool %s: %w", tc.Name, context.Cause(ctx))
		}
		if err != nil {
			entry.Error = err.Error()
			content = toolErrorResult(tc.Name, err.Error())
		} else {
			entry.Result = out
			content = out
			if content == "" {
				content = emptyToolResult
			}
		}
	}
	if r.req.Hooks.Has(hooks.ToolAfterCall.Name()) {
		ac := &hooks.ToolAfterCallContext{ToolCall: hc, Result: entry.Result, Error: entry.Error, Blocked: entry.Blocked, Duration: entry.Duration}
		if err := hooks.Emit(ctx, r.req.Hooks, hooks.ToolAfterCall, ac); err != nil {
			log.Warn().Err(err).Str("tool", tc.Name).Msg("failed to run tool:after_call hooks")
		}
	}
	if hooks.Subscribed(r.req.Hooks, hooks.ToolResult) {
		var err error
		if content, err = r.toolResult(ctx, hc, tc.ID, &entry, content); err != nil {
			return "", err
		}
	}
	log.Debug().Str("tool", tc.Name).Bool("blocked", entry.Blocked).Str("error", entry.Error).
		Dur("duration", entry.Duration).Msg("tool call finished")
	r.res.ToolTrace = append(r.res.ToolTrace, entry)
	if r.req.OnToolCall != nil {
		r.req.OnToolCall(entry)
	}
	return content, nil
}

// gateResult is what the tool:before_call gates decided.
type gateResult struct {
	declined       bool
	reason         string
	needsApproval  bool
	approvalReason string
}

// gate emits tool:before_call; the hooks see whether a rule requires
// approval already. An emission that cannot run (recursion limit) declines
// the call: the gates were not asked.
func (r *runner) gate(ctx context.Context, hc hooks.ToolCall, needs bool, needsReason string) (gateResult, error) {
	if !r.req.Hooks.Has(hooks.ToolBeforeCall.Name()) {
		return gateResult{needsApproval: needs, approvalReason: needsReason}, nil
	}
	bc := &hooks.ToolBeforeCallContext{ToolCall: hc, ApprovalRequired: needs, ApprovalReason: needsReason}
	if err := hooks.Emit(ctx, r.req.Hooks, hooks.ToolBeforeCall, bc); err != nil {
		if ctx.Err() != nil {
			return gateResult{}, fmt.Errorf("failed to finish the turn during tool %s: %w", hc.Tool, context.Cause(ctx))
		}
		zerolog.Ctx(ctx).Warn().Err(err).Str("tool", hc.Tool).Msg("tool:before_call hooks could not run; declining the call")
		return gateResult{declined: true, reason: "the tool gates could not run (" + err.Error() + ")"}, nil
	}
	return gateResult{declined: bc.Declined, reason: bc.DeclineReason, needsApproval: bc.ApprovalRequired, approvalReason: bc.ApprovalReason}, nil
}

// approve asks RunRequest.Approve; without one, the call is denied.
func (r *runner) approve(ctx context.Context, req ApprovalRequest) (bool, string, error) {
	if r.req.Approve == nil {
		return false, "the call needs a person's approval, and nobody can approve calls here", nil
	}
	approved, reason, err := r.req.Approve(ctx, req)
	if err != nil || ctx.Err() != nil {
		return false, "", fmt.Errorf("failed to finish the turn while tool %s waited for approval: %w", req.Call.Tool, cmp.Or(context.Cause(ctx), err))
	}
	return approved, reason, nil
}

type toolOutcome struct {
	out string
	err error
}

// invoke runs the tool on its own goroutine with the tool timeout; a tool
// that ignores its context is abandoned when the timeout passes.
func (r *runner) invoke(ctx context.Context, tool Tool, hc hooks.ToolCall) (string, error) {
	tctx, cancel := context.WithTimeout(ctx, r.toolTimeout)
	defer cancel()
	tctx = context.WithValue(tctx, toolCtxKey{}, &toolCtx{call: hc, reg: r.req.Hooks})
	done := make(chan toolOutcome, 1)
	go func() {
		var o toolOutcome
		defer func() {
			if p := recover(); p != nil {
				zerolog.Ctx(ctx).Error().Str("tool", hc.Tool).Bytes("stack", debug.Stack()).Any("panic", p).Msg("tool panicked")
				o = toolOutcome{err: fmt.Errorf("the tool crashed: %v", p)}
			}
			done <- o
		}()
		o.out, o.err = tool.Call(tctx, slices.Clone(hc.Arguments))
	}()
	select {
	case o := <-done:
		if o.err != nil && tctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
			return "", fmt.Errorf("the tool did not finish within %s", r.toolTimeout)
		}
		return o.out, o.err
	case <-tctx.Done():
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		zerolog.Ctx(ctx).Warn().Str("tool", hc.Tool).Dur("timeout", r.toolTimeout).Msg("tool ignored its deadline; abandoned")
		return "", fmt.Errorf("the tool did not finish within %s", r.toolTimeout)
	}
}

// toolArguments returns the arguments as the JSON the hooks and the tool
// get, and whether they are a JSON object. Arguments that are not an
// object are passed to hooks as a JSON string holding the model's text.
func toolArguments(raw string) (json.RawMessage, bool) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return json.RawMessage("{}"), true
	}
	if trimmed[0] == '{' && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed), true
	}
	quoted, _ := json.Marshal(raw)
	return quoted, false
}

// availableTools names the tools this round offered, for a model that
// called another.
func (r *runner) availableTools() string {
	names := r.req.Tools.Names()
	if r.offered != nil {
		names = slices.DeleteFunc(names, func(n string) bool { return !r.offered[n] })
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

type toolCtxKey struct{}

type toolCtx struct {
	call hooks.ToolCall
	reg  *hooks.Registry
}

// ToolCallFrom returns the call a tool runs for (tool, arguments, agent,
// room, thread, requester, session), when ctx is a tool call's context.
func ToolCallFrom(ctx context.Context) (hooks.ToolCall, bool) {
	tc, ok := ctx.Value(toolCtxKey{}).(*toolCtx)
	if !ok {
		return hooks.ToolCall{}, false
	}
	return tc.call, true
}

// ToolCorrelationID returns the correlation id of the turn a tool call
// belongs to (the one its hook runs carry), when ctx is a tool call's
// context.
func ToolCorrelationID(ctx context.Context) (string, bool) {
	if _, ok := ctx.Value(toolCtxKey{}).(*toolCtx); !ok {
		return "", false
	}
	return hooks.CorrelationID(ctx), true
}

// EmitEvent lets a tool emit the custom event name with payload (marshalled
// to JSON) to the hooks of the turn's registry. The context it builds names
// the call's agent, room, thread and requester; it runs in observer mode and
// counts towards the recursion limit carried by ctx. ctx must be the tool
// call's context.
func EmitEvent(ctx context.Context, name string, payload any) error {
	tc, ok := ctx.Value(toolCtxKey{}).(*toolCtx)
	if !ok {
		return fmt.Errorf("failed to emit %q: not called from a tool: %w", name, hooks.ErrNoService)
	}
	ev, err := hooks.NewCustomEvent(name)
	if err != nil {
		return fmt.Errorf("failed to emit custom event: %w", err)
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("failed to emit %q: failed to marshal payload: %w", name, err)
	}
	c := &hooks.CustomEventContext{
		Payload: raw, Agent: tc.call.Agent, RoomID: tc.call.RoomID, ThreadID: tc.call.ThreadID, SenderID: tc.call.RequesterID,
	}
	return hooks.Emit(ctx, tc.reg, ev, c)
}
