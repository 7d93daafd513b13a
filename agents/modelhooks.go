package agents

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

// The tool loop's model hooks: model:request before every model call,
// model:response after it, tool:result before a tool's output reaches the
// model and the turn's messages. Each is emitted only when the turn's
// registry has hooks for it (hooks.Subscribed): without hooks the loop builds
// nothing and sends what it sent before.

// ErrRequestRefused is what a run ends with when a model:request hook
// refused a model call (errors.Is); the *RefusedError it comes in
// (errors.As) carries the reason for the person.
var ErrRequestRefused = errors.New("a model:request hook refused the model call")

// RefusedError ends a run whose model call a model:request hook refused
// (ModelRequestContext.Refuse), or whose model:request hooks could not run
// at all. The model was not called for that round.
type RefusedError struct {
	// Round is the refused call's round: 1 for the turn's first model
	// call.
	Round int
	// Reason is the hook's, meant for the person ("the request was
	// refused" when the hook gave none).
	Reason string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s (round %d): %s", ErrRequestRefused.Error(), e.Round, e.Reason)
}

// Unwrap makes errors.Is(err, ErrRequestRefused) true.
func (e *RefusedError) Unwrap() error { return ErrRequestRefused }

// withheldResult is what the model gets instead of a tool's output when
// the tool:result hooks that could mask it were not able to run.
const withheldResult = "[the tool's output was withheld: the tool:result hooks could not run]"

// request emits model:request for mreq, the call of round (from 1), and
// applies what the hooks left: the messages and tools sent, or a refusal.
// r.offered is set to the tools the call offers when the hooks changed
// them (nil: all of the Toolset's), so that the model cannot call a tool
// a hook took away. A failed emission refuses the call: a redaction hook
// is never skipped.
func (r *runner) request(ctx context.Context, mreq *Request, round int) error {
	r.offered = nil
	c := &hooks.ModelRequestContext{
		Where: hooks.WhereFrom(ctx), Model: r.req.ModelName, ProviderModel: r.req.ProviderModel, Round: round,
		Messages: chatMessages(mreq.Messages), Tools: modelTools(mreq.Tools),
	}
	msgs, tools := c.Messages, c.Tools
	if err := hooks.Emit(ctx, r.req.Hooks, hooks.ModelRequest, c); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("failed to get a reply from the model: %w", context.Cause(ctx))
		}
		zerolog.Ctx(ctx).Warn().Err(err).Int("round", round).Msg("model:request hooks could not run; refusing the model call")
		return &RefusedError{Round: round, Reason: "the checks of the model request could not run"}
	}
	if c.Refused {
		reason := strings.TrimSpace(c.RefuseReason)
		if reason == "" {
			reason = "the request was refused"
		}
		zerolog.Ctx(ctx).Info().Int("round", round).Str("reason", reason).Msg("a model:request hook refused the model call")
		return &RefusedError{Round: round, Reason: reason}
	}
	if !hooks.SameMessages(msgs, c.Messages) {
		mreq.Messages = fromChat(mreq.Messages, c.Messages)
	}
	if !sameModelTools(tools, c.Tools) {
		mreq.Tools, r.offered = r.offer(ctx, mreq.Tools, c.Tools)
	}
	return nil
}

// offer returns the tools a model:request hook left, as sent, and their
// names; a tool that was not offered (the loop could not run it) is
// dropped.
func (r *runner) offer(ctx context.Context, specs []ToolSpec, left []hooks.ModelTool) ([]ToolSpec, map[string]bool) {
	offered := make(map[string]bool, len(specs))
	for _, s := range specs {
		offered[s.Name] = true
	}
	out := make([]ToolSpec, 0, len(left))
	names := make(map[string]bool, len(left))
	for _, t := range left {
		if !offered[t.Name] || names[t.Name] {
			zerolog.Ctx(ctx).Warn().Str("tool", t.Name).Msg("a model:request hook added a tool that is not offered (or twice); not sending it")
			continue
		}
		names[t.Name] = true
		out = append(out, ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	return out, names
}

// response emits model:response for the call of round that returned comp
// (nil or partial when it failed with err) after latency. The emission is
// not cut short by the turn's end: observers see every call.
func (r *runner) response(ctx context.Context, round int, comp *Completion, err error, latency time.Duration) {
	c := &hooks.ModelResponseContext{
		Where: hooks.WhereFrom(ctx), Model: r.req.ModelName, ProviderModel: r.req.ProviderModel, Round: round, Latency: latency,
	}
	if comp != nil {
		c.Text, c.FinishReason = comp.Text, string(comp.FinishReason)
		for _, tc := range comp.ToolCalls {
			c.ToolCalls = append(c.ToolCalls, hooks.ChatToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		u := comp.Usage
		c.Usage = hooks.TokenUsage{
			Model: r.req.ProviderModel, InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
			TotalTokens: cmp.Or(u.TotalTokens, u.PromptTokens+u.CompletionTokens), ModelCalls: 1,
		}
	}
	if err != nil {
		c.Error = err.Error()
		var me *ModelError
		if errors.As(err, &me) {
			c.ErrorKind = string(me.Kind)
		}
	}
	if err := hooks.Emit(context.WithoutCancel(ctx), r.req.Hooks, hooks.ModelResponse, c); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Int("round", round).Msg("failed to run model:response hooks")
	}
}

// toolResult emits tool:result for a call's tool message content and
// returns the content the hooks left; a call that succeeded gets it as its
// trace entry's result too. When the hooks cannot run (the recursion
// limit), the output is withheld: a masking hook is never skipped. Only
// the end of ctx is an error.
func (r *runner) toolResult(ctx context.Context, hc hooks.ToolCall, callID string, entry *hooks.ToolTraceEntry, content string) (string, error) {
	c := &hooks.ToolResultContext{ToolCall: hc, CallID: callID, Error: entry.Error, Blocked: entry.Blocked, Content: content}
	if err := hooks.Emit(ctx, r.req.Hooks, hooks.ToolResult, c); err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("failed to finish the turn during tool %s: %w", hc.Tool, context.Cause(ctx))
		}
		zerolog.Ctx(ctx).Warn().Err(err).Str("tool", hc.Tool).Msg("tool:result hooks could not run; withholding the tool's output")
		c.Content = withheldResult
	}
	if c.Content == content {
		return content, nil
	}
	if entry.Error == "" {
		entry.Result = c.Content
	}
	if c.Content == "" {
		return emptyToolResult, nil
	}
	return c.Content, nil
}

// modelTools is the hook-facing form of the tools offered.
func modelTools(specs []ToolSpec) []hooks.ModelTool {
	if len(specs) == 0 {
		return nil
	}
	out := make([]hooks.ModelTool, len(specs))
	for i, s := range specs {
		out[i] = hooks.ModelTool{Name: s.Name, Description: s.Description, Parameters: s.Parameters}
	}
	return out
}

func sameModelTools(a, b []hooks.ModelTool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

// fromChat turns the messages model:request hooks left back into the
// messages sent. What hooks do not see stays with the message it came
// with: a user message keeps its images, and a message keeps its stable
// prefix (prompt caching) while its text still starts with it. A message
// is matched with the one at its place in orig counted from the start, or
// else from the end (a hook that inserted or removed messages before it),
// when the roles agree.
func fromChat(orig []Message, cm []hooks.ChatMessage) []Message {
	out := make([]Message, len(cm))
	shift := len(cm) - len(orig)
	for i, c := range cm {
		m := Message{Role: Role(c.Role), Content: c.Content, Name: c.Name, ToolCallID: c.ToolCallID}
		for _, tc := range c.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		j := i
		if j >= len(orig) || orig[j].Role != m.Role {
			j = i - shift
		}
		if j >= 0 && j < len(orig) && orig[j].Role == m.Role {
			o := orig[j]
			if m.Role == RoleUser {
				m.Images = o.Images
			}
			if sp := o.StablePrefix; sp > 0 && len(m.Content) >= sp && m.Content[:sp] == o.Content[:sp] {
				m.StablePrefix = sp
			}
		}
		out[i] = m
	}
	return out
}
