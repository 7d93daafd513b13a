package hooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// The contexts of the model's traffic: model:resolve (which model a turn
// uses), model:request and model:response (every model call of the tool
// loop), tool:result (a tool's output before the model and the history
// see it) and usage:budget_reached. Each names the conversation it is
// about with an embedded Where, which the emitters take from the turn's
// context (WhereFrom), and its agents= and rooms= filters match Where's
// Agent and RoomID.

// The checks of the model contexts (see checker).
var (
	_ checker[ModelResolveContext] = (*ModelResolveContext)(nil)
	_ checker[ModelRequestContext] = (*ModelRequestContext)(nil)
)

func (w *Where) route() route {
	return route{agent: w.Agent, room: w.RoomID, thread: w.ThreadID, requester: w.RequesterID}
}

// ModelSource says where the model a turn starts from was chosen.
type ModelSource string

// The sources of a turn's model.
const (
	ModelFromConfig ModelSource = "config" // the agent's model in config.yaml
	ModelFromThread ModelSource = "thread" // `!model NAME` in the thread
	ModelFromRoom   ModelSource = "room"   // `!model room NAME`, the room's default
)

// ModelResolveContext is passed to model:resolve hooks (transformer, 1 s).
// It fires once per turn that will call a model, before its prompt is
// built: after message:claim and the budget check, before message:enrich.
// Model starts as the person's `!model` choice (Requested) or, without
// one, the agent's configured model; a hook may set Model to another of
// Models (the models config.yaml defines) to route the turn by cost,
// content or person. A hook that chooses a model not in Models fails: it
// is logged and counted as an error and its choice is dropped; the next
// hook sees the model the hooks before it left.
type ModelResolveContext struct {
	Base
	Where
	// Text is the person's message (its text, before enrichment; a file's
	// caption).
	Text string `json:"text"`
	// Configured is the agent's model in config.yaml.
	Configured string `json:"configured"`
	// Requested is the model chosen with `!model` for the thread or the
	// room ("" when nobody chose one); Source says which.
	Requested string      `json:"requested,omitempty"`
	Source    ModelSource `json:"source"`
	// Models are the names of the models config.yaml defines, sorted: the
	// models a hook may choose.
	Models []string `json:"models"`
	// Model is the model the turn will use.
	Model string `json:"model"`
}

func (c *ModelResolveContext) route() route { return c.Where.route() }
func (c *ModelResolveContext) isolate()     { c.Models = cloneNonEmpty(c.Models) }
func (c *ModelResolveContext) merge(from *ModelResolveContext) {
	mergeFields(c.mutableFields(), c, from)
}

// check fails a hook that chose a model config.yaml does not define (one
// that left the model as it got it never fails).
func (c *ModelResolveContext) check(before *ModelResolveContext) error {
	if c.Model == before.Model || slices.Contains(c.Models, c.Model) {
		return nil
	}
	return fmt.Errorf("the hook chose model %q, which is not configured (configured: %s)", c.Model, strings.Join(c.Models, ", "))
}
func (c *ModelResolveContext) describe(b *ModelResolveContext, detail bool) (Effect, string) {
	if c.Model == b.Model {
		return EffectUnchanged, ""
	}
	if !detail {
		return EffectChanged, ""
	}
	var ch changes
	ch.text("model", b.Model, c.Model)
	return EffectChanged, ch.String()
}

// ModelChoice is what a turn knows of its model before model:resolve.
type ModelChoice struct {
	// Text is the person's message.
	Text string
	// Configured is the agent's model in config.yaml; Requested the
	// `!model` choice for the thread or the room ("" for none), Source
	// which of the two chose it (ModelFromConfig when Requested is "").
	Configured string
	Requested  string
	Source     ModelSource
	// Models are the names of every model config.yaml defines.
	Models []string
}

// ResolveModel runs model:resolve for a turn and returns the model the
// turn uses: ch.Requested, else ch.Configured, unless a hook chose another
// of ch.Models. A Requested model that is not among ch.Models (a choice
// config.yaml no longer defines) is ignored. The context's Where is taken
// from ctx (WithWhere). Without model:resolve hooks nothing is built. When
// the emission fails (ctx ended, the recursion limit) it returns the model
// the turn started from with the error, which the caller logs.
func ResolveModel(ctx context.Context, reg *Registry, ch ModelChoice) (string, error) {
	if ch.Requested != "" && len(ch.Models) > 0 && !slices.Contains(ch.Models, ch.Requested) {
		ch.Requested = ""
	}
	model := cmp.Or(ch.Requested, ch.Configured)
	if !Subscribed(reg, ModelResolve) {
		return model, nil
	}
	src := ch.Source
	if ch.Requested == "" {
		src = ModelFromConfig
	}
	models := slices.Clone(ch.Models)
	slices.Sort(models)
	c := &ModelResolveContext{
		Where: WhereFrom(ctx), Text: ch.Text, Configured: ch.Configured, Requested: ch.Requested,
		Source: src, Models: models, Model: model,
	}
	if err := Emit(ctx, reg, ModelResolve, c); err != nil {
		return model, fmt.Errorf("failed to run the model:resolve hooks: %w", err)
	}
	return c.Model, nil
}

// ModelTool is a tool as a model:request hook sees it: what the model is
// told about it.
type ModelTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON schema of the tool's arguments.
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// The roles of a ChatMessage.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
)

// ModelRequestContext is passed to model:request hooks (transformer, 1 s).
// It fires before every model call of a turn: the first, and the one after
// each round of tool calls (Round counts them from 1). Messages are the
// whole prompt as it will be sent (system prompt, history, the new turn,
// and this turn's assistant messages and tool results so far); Tools the
// tools the model is offered. A hook may change, add or remove messages
// (redact a secret, add an instruction) and remove tools; what the last
// successful hook left is sent, for this call only: the stored history
// and the next round's request are built from the turn's own messages
// again (tool:result changes what the history keeps). A hook may instead
// Refuse the call: the chain stops, the model is not called, and the turn
// ends with the reason. A hook that leaves a message with an unknown role
// fails (logged, its changes dropped). A tool a hook adds that was not
// offered is not sent.
type ModelRequestContext struct {
	Base
	Where
	// Model is the name of the model in config.yaml, ProviderModel the
	// model its provider is asked for.
	Model         string `json:"model"`
	ProviderModel string `json:"provider_model,omitempty"`
	// Round is 1 for the turn's first model call, 2 for the call after
	// the first round of tool calls, and so on.
	Round    int           `json:"round"`
	Messages []ChatMessage `json:"messages"`
	Tools    []ModelTool   `json:"tools,omitempty"`
	// Refused, set with Refuse, stops the call; RefuseReason is shown to
	// the person ("⚠️ Sorry, I could not answer: <reason>").
	Refused      bool   `json:"refused"`
	RefuseReason string `json:"refuse_reason,omitempty"`
}

// Refuse stops the model call: the turn ends and the person sees reason.
func (c *ModelRequestContext) Refuse(reason string) {
	c.Refused = true
	c.RefuseReason = reason
}

// RemoveTool removes the tool called name from the tools offered for this
// call and reports whether it was offered.
func (c *ModelRequestContext) RemoveTool(name string) bool {
	n := len(c.Tools)
	c.Tools = slices.DeleteFunc(c.Tools, func(t ModelTool) bool { return t.Name == name })
	return len(c.Tools) < n
}

// ReplaceText replaces every occurrence of old with new in the content of
// every message and returns how many it replaced: a redaction.
func (c *ModelRequestContext) ReplaceText(old, new string) int {
	if old == "" {
		return 0
	}
	n := 0
	for i := range c.Messages {
		if k := strings.Count(c.Messages[i].Content, old); k > 0 {
			n += k
			c.Messages[i].Content = strings.ReplaceAll(c.Messages[i].Content, old, new)
		}
	}
	return n
}

func (c *ModelRequestContext) route() route { return c.Where.route() }
func (c *ModelRequestContext) isolate() {
	c.Messages = cloneMessages(c.Messages)
	c.Tools = cloneNonEmpty(c.Tools)
	for i := range c.Tools {
		c.Tools[i].Parameters = cloneNonEmpty(c.Tools[i].Parameters)
	}
}
func (c *ModelRequestContext) merge(from *ModelRequestContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *ModelRequestContext) stopped() bool { return c.Refused }

// check fails a hook that left a message no model understands.
func (c *ModelRequestContext) check(*ModelRequestContext) error {
	for i, m := range c.Messages {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant, RoleTool:
		default:
			return fmt.Errorf("message %d has role %q (want %s, %s, %s or %s)", i, m.Role, RoleSystem, RoleUser, RoleAssistant, RoleTool)
		}
	}
	return nil
}
func (c *ModelRequestContext) describe(b *ModelRequestContext, detail bool) (Effect, string) {
	msgs := !SameMessages(c.Messages, b.Messages)
	tools := !sameTools(c.Tools, b.Tools)
	refused := c.Refused != b.Refused || c.RefuseReason != b.RefuseReason
	var eff Effect
	switch {
	case c.Refused && !b.Refused:
		eff = EffectDeclined
	default:
		eff = effect(msgs || tools || refused, false)
	}
	if !detail || eff == EffectUnchanged {
		return eff, ""
	}
	var ch changes
	if c.Refused && !b.Refused {
		ch.value("refused", c.RefuseReason)
	} else if refused {
		ch.flag("refused", b.Refused, c.Refused)
		ch.text("refuse_reason", b.RefuseReason, c.RefuseReason)
	}
	if msgs {
		ch.add(describeCount("messages", len(b.Messages), len(c.Messages)))
	}
	if tools {
		ch.add(describeCount("tools", len(b.Tools), len(c.Tools)))
	}
	return eff, ch.String()
}

// describeCount is a list's Change entry: "messages: 3 → 4", or
// "messages: 3 entries edited".
func describeCount(name string, from, to int) string {
	if from == to {
		return name + ": " + strconv.Itoa(to) + " edited"
	}
	return name + ": " + strconv.Itoa(from) + " → " + strconv.Itoa(to)
}

// cloneMessages gives messages private copies of the message list and of
// each message's tool calls.
func cloneMessages(m []ChatMessage) []ChatMessage {
	m = cloneNonEmpty(m)
	for i := range m {
		m[i].ToolCalls = cloneNonEmpty(m[i].ToolCalls)
	}
	return m
}

// SameMessages reports whether two message lists are equal, field by
// field: the model:request emitter sends the turn's own messages when the
// hooks left them so.
func SameMessages(a, b []ChatMessage) bool {
	return slices.EqualFunc(a, b, func(x, y ChatMessage) bool {
		return x.Role == y.Role && x.Content == y.Content && x.Name == y.Name && x.ToolCallID == y.ToolCallID &&
			slices.Equal(x.ToolCalls, y.ToolCalls)
	})
}

func sameTools(a, b []ModelTool) bool {
	return slices.EqualFunc(a, b, func(x, y ModelTool) bool {
		return x.Name == y.Name && x.Description == y.Description && bytes.Equal(x.Parameters, y.Parameters)
	})
}

// ModelResponseContext is passed to model:response hooks (observer, 1 s).
// It fires after every model call of a turn (each round of the tool loop),
// also after one that failed (Error): what the model answered, the tokens
// the provider counted and how long the call took. Nothing can be changed.
type ModelResponseContext struct {
	Base
	Where
	Model         string `json:"model"`
	ProviderModel string `json:"provider_model,omitempty"`
	// Round is the call's round, as in model:request.
	Round int `json:"round"`
	// Text is the text the model streamed (also the part streamed before
	// a failure).
	Text string `json:"text"`
	// ToolCalls are the calls the model asked for, with their arguments as
	// the model wrote them.
	ToolCalls    []ChatToolCall `json:"tool_calls,omitempty"`
	FinishReason string         `json:"finish_reason,omitempty"`
	// Usage is what the provider counted for this call (ModelCalls 1);
	// zero when it reported nothing.
	Usage TokenUsage `json:"usage"`
	// Latency is from sending the request to the end of the reply's
	// stream (or the failure).
	Latency time.Duration `json:"latency_ns"`
	// Error says why the call failed ("" when it did not), ErrorKind how
	// (http, server, timeout, cancelled, network, protocol).
	Error     string `json:"error,omitempty"`
	ErrorKind string `json:"error_kind,omitempty"`
}

func (c *ModelResponseContext) route() route                { return c.Where.route() }
func (c *ModelResponseContext) isolate()                    { c.ToolCalls = cloneNonEmpty(c.ToolCalls) }
func (c *ModelResponseContext) merge(*ModelResponseContext) {}
func (c *ModelResponseContext) describe(*ModelResponseContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}

// ToolResultContext is passed to tool:result hooks (transformer, 500 ms).
// It fires for every tool call of a turn, after the call ended and
// tool:after_call ran, before the model and the stored history see the
// result. Content is the text of the tool message: the tool's output, or
// what the model is told of a failed, declined or denied call (Error,
// Blocked). A hook may replace Content (mask a secret a tool printed):
// what the last successful hook left is what the model reads, what
// RunResult.Messages and the history keep and, for a call that succeeded,
// the result of its tool trace entry. tool:after_call saw the output as
// the tool returned it.
type ToolResultContext struct {
	Base
	ToolCall
	// CallID is the model's id of the call, which the tool message
	// answers.
	CallID string `json:"call_id"`
	// Error is why the call failed or was refused ("" when it ran);
	// Blocked is set for a call a gate declined or a person denied.
	Error   string `json:"error,omitempty"`
	Blocked bool   `json:"blocked"`
	// Content is the tool message's text.
	Content string `json:"content"`
}

func (c *ToolResultContext) route() route { return c.ToolCall.route() }
func (c *ToolResultContext) isolate()     { c.Arguments = cloneNonEmpty(c.Arguments) }
func (c *ToolResultContext) merge(from *ToolResultContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *ToolResultContext) describe(b *ToolResultContext, detail bool) (Effect, string) {
	if c.Content == b.Content {
		return EffectUnchanged, ""
	}
	if !detail {
		return EffectChanged, ""
	}
	var ch changes
	ch.text("content", b.Content, c.Content)
	return EffectChanged, ch.String()
}

// BudgetScope says whose daily token budget a usage:budget_reached event
// is about.
type BudgetScope string

// The scopes of a daily token budget.
const (
	BudgetPerson BudgetScope = "person" // a person's budget, over every agent and room
	BudgetAgent  BudgetScope = "agent"  // an agent's budget, over every room and person
)

// BudgetReachedContext is passed to usage:budget_reached hooks (observer,
// 3 s). It fires when the usage a turn recorded makes a person or an agent
// cross a share of its daily token budget (Threshold: 0.8 is 80 %, 1 the
// whole budget), once per budget, share and day, after the turn's usage
// was stored. Where names the turn whose usage crossed it. Nothing can be
// changed.
type BudgetReachedContext struct {
	Base
	Where
	Scope BudgetScope `json:"scope"`
	// Subject is whose budget it is: the person's user id (scope person,
	// the turn's requester) or the agent's name (scope agent).
	Subject string `json:"subject"`
	// Limit is the daily budget in tokens, Used what was used of it on
	// Day (UTC, "2006-01-02") with this turn.
	Limit int64 `json:"limit"`
	Used  int64 `json:"used"`
	// Threshold is the share of Limit that Used reached.
	Threshold float64 `json:"threshold"`
	Day       string  `json:"day"`
}

// Person returns the person whose budget it is ("" for an agent's).
func (c *BudgetReachedContext) Person() id.UserID {
	if c.Scope != BudgetPerson {
		return ""
	}
	return id.UserID(c.Subject)
}

func (c *BudgetReachedContext) route() route                { return c.Where.route() }
func (c *BudgetReachedContext) isolate()                    {}
func (c *BudgetReachedContext) merge(*BudgetReachedContext) {}
func (c *BudgetReachedContext) describe(*BudgetReachedContext, bool) (Effect, string) {
	return EffectUnchanged, ""
}
