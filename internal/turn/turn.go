package turn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/enrich"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/team"
	"github.com/hookroom/hookroom/trace"
	"github.com/hookroom/hookroom/tracking"
	"github.com/hookroom/hookroom/usage"
)

// Delivery pacing. A reply that is complete within placeholderDelay is
// sent as one message; a slower one gets a placeholder that is edited
// while the model streams, at most once per editInterval (homeservers rate
// limit edits).
const (
	placeholderDelay = 400 * time.Millisecond
	editInterval     = time.Second
	typingTimeout    = 30 * time.Second
	// typingRequestTimeout bounds one typing request. They are never
	// cancelled with the turn (see typingNotice), so this is their end.
	typingRequestTimeout = 10 * time.Second
	turnTimeout          = 10 * time.Minute
	// Placeholder is the text of the message a slow reply starts as.
	Placeholder = "…"
	// StopKey is the reaction that stops a turn.
	StopKey = "🛑"
)

// Account is what a turn needs of the Matrix account it answers with: the
// agent's *matrixio.Account, or a fake in unit tests that run a turn
// without a homeserver. Its methods are called from the turn's goroutines:
// the turn's own, its streaming loop and its typing notice.
type Account interface {
	UserID() id.UserID
	SendText(ctx context.Context, room id.RoomID, text string, opts matrixio.SendOptions) (id.EventID, error)
	Edit(ctx context.Context, room id.RoomID, target id.EventID, text string, opts matrixio.SendOptions) (id.EventID, error)
	Redact(ctx context.Context, room id.RoomID, target id.EventID, reason string) (id.EventID, error)
	SetTyping(ctx context.Context, room id.RoomID, typing bool, timeout time.Duration) error
	// SyncPosition and FindSent find a message a send may have posted
	// without the turn learning its id (see delivery.go).
	SyncPosition(ctx context.Context) (string, error)
	FindSent(ctx context.Context, room id.RoomID, since, txnKey string) ([]id.EventID, error)
}

var _ Account = (*matrixio.Account)(nil)

// Deps are the long-lived collaborators every turn shares. The bot builds
// them once, at start-up; a turn never changes them.
type Deps struct {
	// DB is the database the stores below live in: a stored turn, its
	// usage and its message's handled mark are written in one transaction.
	DB      *dbutil.Database
	Ledger  *tracking.Store // the inbox and the delivery intents
	History *agents.History
	Usage   *usage.Store
	Metrics *metrics.Metrics // nil: not counted
	// Index finds running and queued turns to stop them (🛑, redactions).
	Index *Index
	// Typing runs the typing requests, which outlive the turn; the bot
	// waits for them at shutdown.
	Typing *sync.WaitGroup
	// SaveTrace saves a finished turn's trace in the background; nil when
	// traces are off.
	SaveTrace func(*trace.Trace)
	// Download fetches an attachment of the turn's message, at most limit
	// bytes (matrixio.ErrMediaTooLarge past it).
	Download func(ctx context.Context, ref matrixio.MediaRef, limit int64) ([]byte, error)
	// PlaceholderDelay and EditInterval pace the delivery (defaults 400ms
	// and 1s): a reply complete within PlaceholderDelay is sent as one
	// message; a slower one gets a placeholder edited at most once per
	// EditInterval while the model streams.
	PlaceholderDelay time.Duration
	EditInterval     time.Duration
}

// Spec is everything one turn needs to know of the configuration in
// service, taken once from it when the turn is built: a turn sees one
// world, whatever reloads happen while it runs.
type Spec struct {
	Event    *event.Event
	Envelope hooks.Envelope // AgentName is set to Agent
	Agent    hooks.AgentName
	// Account is the agent's account; Accounts finds the other managed
	// accounts of the same world by user id (a replay's intents may name
	// them), nil when there is none.
	Account  Account
	Accounts func(id.UserID) Account
	Registry *hooks.Registry
	Replayed bool // the message is answered again after a restart
	Persona  Persona

	// Model is the agent's model in config.yaml. Models are every model
	// config.yaml defines, by name: model:resolve hooks may switch the turn
	// to one of them. Requested is the model a person chose with !model for
	// the thread or the room ("" for none; Source says which), which the
	// turn starts from instead of Model.
	Model     ModelOption
	Models    map[string]ModelOption
	Requested string
	Source    hooks.ModelSource

	Tools     *agents.Toolset
	Streaming bool
	Budgets   usage.Budgets
	// BudgetAlerts are the shares of a daily budget at which
	// usage:budget_reached fires (usage.alert_at).
	BudgetAlerts []float64
	Attachments  AttachmentLimits

	// ApprovalRules say which tool calls wait for a person (tool_approval);
	// ToolSources names each tool's source (plugin, MCP server, builtin) for
	// them. Approvals is the store and room side of approvals; needed only
	// when a call waits.
	ApprovalRules   []approval.Rule
	ToolSources     map[string]string
	ApprovalTimeout time.Duration
	Approvals       Approvals

	// Team, when set, makes this a team's turn: its members answer and its
	// leader writes the reply (team.go), instead of one model run.
	Team *TeamSpec

	// Trace records the turn for the console; nil when traces are off.
	// Mask hides secrets in what the trace keeps of tool calls.
	Trace *trace.Recorder
	Mask  func(string) string
}

// ModelOption is a model a turn may run on.
type ModelOption struct {
	Name  string // its name in config.yaml
	Model agents.Model
	// ProviderModel is the model id its provider is asked for (usage,
	// metrics); ContextWindow bounds the history; Summarize compacts a
	// long history with the model (not for echo); Vision: it sees images.
	ProviderModel string
	ContextWindow int
	Summarize     bool
	Vision        bool
}

// Persona is who the agent says it is in its system prompt.
type Persona struct {
	DisplayName  string // as it signs; the agent's name when unset
	Role         string
	Instructions string
}

// Turn is one agent's answer to one message. Build it with New, run it
// once with Run.
type Turn struct {
	deps  *Deps
	spec  Spec
	ev    *event.Event
	env   hooks.Envelope
	agent hooks.AgentName
	acct  Account
	reg   *hooks.Registry
	// model is the model the turn runs on (modelOpt's, counted): the
	// configured one until resolveModel ran.
	model    agents.Model
	modelOpt ModelOption
	scope    agents.ScopeKey
	replayed bool
	log      zerolog.Logger

	mu      sync.Mutex
	text    strings.Builder
	reply   id.EventID // the placeholder or reply event, once sent
	visible bool       // real text is visible in the room
	edits   int
	parts   int              // parts of the answer delivered (post)
	earlier []tracking.Reply // parts 1, 2, … the last run posted (replays)
	// runKey names this run of the turn in its edits' transaction keys.
	runKey string
	// pending are the last run's intents (replays); unconfirmed: a send
	// of this run may have posted a message the turn does not know;
	// unrecorded: a message could not be recorded (see sweepIntents).
	pending     []tracking.Intent
	unconfirmed bool
	unrecorded  bool

	typing *typingNotice // while the model works; nil before

	used       agents.Usage // what the model calls used (spent)
	modelCalls int
	teamUsage  []team.AgentUsage // a team turn's usage per agent (runTeam)

	stages        *stages         // stage latencies and the outcome, for the metrics
	trace         *trace.Recorder // the turn's trace for the console (nil: not recorded)
	parent        context.Context // the turn's context before its deadline and stop
	clock         *clock          // the turn's deadline, paused while it waits for approvals
	usedApprovals []string        // approvals this run asked for (ids)

	ending ending // how the turn ended, set by the step that ended it (see finish)
}

// turn is the receiver name the methods use.
type turn = Turn

// New prepares the answer to spec's message, before it is queued behind
// its thread's earlier turns. ctx carries the logger and the message's
// arrival time (WithArrival).
func New(ctx context.Context, deps *Deps, spec Spec) *Turn {
	spec.Envelope.AgentName = spec.Agent
	if spec.Team != nil {
		spec.Envelope.Team = spec.Team.teamInfo()
	}
	t := &turn{
		deps: deps, spec: spec, ev: spec.Event, env: spec.Envelope, agent: spec.Agent, acct: spec.Account,
		reg: spec.Registry, scope: agents.NewScopeKey(spec.Envelope.RoomID, spec.Envelope.ResolvedThreadID),
		replayed: spec.Replayed, runKey: newRunKey(),
		log:    zerolog.Ctx(ctx).With().Str("agent", string(spec.Agent)).Logger(),
		stages: newStages(ctx, deps.Metrics),
		trace:  spec.Trace,
	}
	t.useModel(spec.Model)
	if t.trace != nil {
		t.acct = tracedAccount{Account: t.acct, rec: t.trace}
		t.stages.rec = t.trace
	}
	t.stages.mark(metrics.StageRouted)
	return t
}

// useModel makes m the model the turn runs on.
func (t *Turn) useModel(m ModelOption) {
	t.modelOpt = m
	t.model = countModel(t.deps.Metrics, t.agent, m.ProviderModel, m.Model)
}

// resolveModel starts the turn on the model a person chose with !model, or
// the agent's, and lets model:resolve hooks choose another configured one.
func (t *Turn) resolveModel(ctx context.Context) {
	names := make([]string, 0, len(t.spec.Models))
	for name := range t.spec.Models {
		names = append(names, name)
	}
	requested := t.spec.Requested
	if _, ok := t.spec.Models[requested]; !ok && requested != "" {
		t.log.Warn().Str("model", requested).Msg("the model chosen with !model is no longer configured; using the agent's")
		requested = ""
	}
	name, err := hooks.ResolveModel(ctx, t.reg, hooks.ModelChoice{
		Text: t.env.Body, Configured: t.spec.Model.Name, Requested: requested, Source: t.spec.Source, Models: names,
	})
	if err != nil {
		t.log.Warn().Err(err).Msg("model:resolve hooks did not finish; using the model the turn started from")
	}
	if name == t.modelOpt.Name {
		return
	}
	if m, ok := t.spec.Models[name]; ok && m.Model != nil {
		t.log.Info().Str("model", name).Msg("turn runs on another model")
		t.useModel(m)
	}
}

// Scope is the conversation (room and thread) the turn answers in; turns
// of one scope run one after the other.
func (t *Turn) Scope() agents.ScopeKey { return t.scope }

// Logger is the turn's logger (with its agent).
func (t *Turn) Logger() *zerolog.Logger { return &t.log }

// ending is how a turn ended: answered (message:after_response) or
// cancelled (message:cancelled). The step that ends a turn sets it with
// endAnswered or endCancelled; finish, the one place a turn ends, acts on
// it.
type ending struct {
	set      bool
	answered bool
	// answered: what was delivered.
	text     string
	eventID  id.EventID
	delivery hooks.DeliveryKind
	kind     hooks.ResponseKind
	// cancelled: why.
	reason hooks.CancelReason
	detail string
	// stored: the message was marked handled with the stored turn (one
	// transaction); otherwise finish marks it handled.
	stored bool
	// unhandled: the message stays unhandled, to be answered after a
	// restart (hookroom is stopping).
	unhandled bool
}

// endAnswered ends the turn with a delivered reply.
func (t *turn) endAnswered(text string, evID id.EventID, delivery hooks.DeliveryKind, kind hooks.ResponseKind, stored bool) {
	t.ending = ending{set: true, answered: true, text: text, eventID: evID, delivery: delivery, kind: kind, stored: stored}
}

// endCancelled ends the turn without a clean reply.
func (t *turn) endCancelled(reason hooks.CancelReason, detail string) {
	t.ending = ending{set: true, reason: reason, detail: detail}
}

// finish is where every turn ends, deferred by run: it marks the message
// handled (unless the stored turn did, or hookroom is stopping and the
// message is to be answered after the restart) and fires exactly one of
// message:after_response and message:cancelled. A turn cut short by a
// shutdown ends as cancelled with reason shutdown.
func (t *turn) finish(ctx, parent context.Context) {
	ctx = context.WithoutCancel(ctx)
	e := t.ending
	if !e.set {
		if parent.Err() == nil {
			// Every step that ends a turn says how; this one did not.
			t.log.Error().Msg("turn ended without an outcome; marking its message handled")
			e = ending{reason: hooks.CancelInterrupted, detail: "ended without an outcome"}
		} else {
			e = ending{reason: hooks.CancelShutdown, unhandled: true,
				detail: "hookroom stopped before the turn ended; the message is answered after the restart"}
		}
	}
	outcome := string(e.reason)
	if e.answered {
		outcome = responseOutcome(e.kind)
	}
	if !e.unhandled { // a turn left for the restart is recorded when it runs again
		if t.deps.SaveTrace != nil {
			t.deps.SaveTrace(t.trace.Finish(outcome, e.detail))
		}
	}
	if !e.stored && !e.unhandled {
		if err := t.markHandled(ctx); err != nil {
			t.log.Error().Err(err).Msg("failed to mark the message handled")
		}
	}
	if !e.unhandled {
		t.alertBudgets(ctx)
	}
	if e.answered {
		t.afterResponse(ctx, e.text, e.eventID, e.delivery, e.kind)
	} else {
		t.cancelled(ctx, e.reason, e.detail)
	}
}

// Run carries the turn from claim to delivery; exactly one of
// message:after_response and message:cancelled fires.
func (t *turn) Run(parent context.Context) {
	// The turn's deadline does not count the time it waits for a person's
	// approval of a tool call.
	parent = hooks.WithWhere(hooks.WithCorrelationID(parent, string(t.ev.ID)), hooks.Where{
		Agent: t.agent, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID,
		RequesterID: t.env.RequesterID, SessionID: string(t.scope),
	})
	if t.trace != nil {
		parent = hooks.WithRunDetail(trace.WithRecorder(parent, t.trace))
	}
	t.parent = parent
	ctx, expire := context.WithCancelCause(parent)
	defer expire(nil)
	t.clock = startClock(turnTimeout, func() { expire(errTurnTimeout) })
	defer t.clock.stop()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	t.deps.Index.start(t.ev.ID, stop)
	defer t.deps.Index.remove(t.ev.ID)
	defer t.finish(ctx, parent) // after every other deferred step of the turn
	if ctx.Err() != nil {
		// Stopped (🛑, a redaction) while it waited behind its thread's
		// earlier turns: it ends before it began. (A shutdown leaves it
		// unhandled, to run after the restart.)
		if parent.Err() == nil {
			t.fail(ctx, hooks.CancelInterrupted, context.Cause(ctx))
		}
		return
	}

	defer func() {
		if parent.Err() == nil { // not left unhandled for the restart
			t.sweepIntents(ctx)
		}
	}()
	if t.replayed {
		// Approvals an earlier run stored for calls this run no longer
		// makes are cancelled, visibly, when it ends (not at a shutdown:
		// the next run may still make them).
		defer func() {
			if parent.Err() == nil {
				t.cancelLeftoverApprovals(ctx)
			}
		}()
		// The last run may have posted the reply (or its placeholder, or
		// some parts of a long reply) already: the answer then edits them
		// instead of posting them a second time.
		t.recoverDelivery(ctx)
	}
	if done := t.claim(ctx); done {
		return
	}
	if t.overBudget(ctx) {
		return
	}
	t.resolveModel(ctx)
	att := t.prepareAttachments(ctx)
	turnText, err := t.enrich(ctx, att.text)
	if err != nil {
		t.fail(ctx, hooks.CancelInterrupted, err)
		return
	}
	msgs, err := t.prompt(ctx, turnText, &att)
	if err != nil {
		t.fail(ctx, hooks.CancelInterrupted, err)
		return
	}
	t.tellAttachments(ctx, att.notices)

	t.typing = t.startTyping(ctx)
	defer t.endTyping()
	deliverCtx, stopDelivery := context.WithCancel(ctx)
	deliveryDone := make(chan struct{})
	go func() { defer close(deliveryDone); t.stream(deliverCtx) }()

	var (
		res    *agents.RunResult
		runErr error
	)
	if t.spec.Team != nil {
		res, runErr = t.runTeam(ctx, turnText)
	} else {
		res, runErr = agents.Run(ctx, agents.RunRequest{
			Model: t.model, ModelName: t.modelOpt.Name, ProviderModel: t.modelOpt.ProviderModel, Messages: msgs, Tools: t.spec.Tools,
			Hooks:  t.reg,
			OnText: t.onText, OnToolCall: t.onToolCall, NeedsApproval: t.needsApproval, Approve: t.approve,
		})
	}
	t.spent(res)
	stopDelivery()
	<-deliveryDone

	if runErr == nil {
		runErr = context.Cause(ctx) // stopped just as the model finished
	} else if cause := context.Cause(ctx); errors.Is(cause, errTurnTimeout) {
		runErr = cause // the turn's deadline cut the model (or a tool) short
	}
	if runErr != nil {
		if parent.Err() != nil {
			// Shutting down: leave the message unhandled; it is answered
			// after the restart (the deterministic transaction ids make
			// the resend collapse).
			return
		}
		t.fail(ctx, hooks.CancelModelError, runErr)
		return
	}
	t.deliver(ctx, turnText, res)
}

var (
	errTurnTimeout = fmt.Errorf("the turn took longer than %s: %w", turnTimeout, context.DeadlineExceeded)
	// ErrStopped is the cause a turn stopped with 🛑 is cancelled with.
	ErrStopped = errors.New("stopped with " + StopKey)
	// ErrRedacted is the cause a turn whose message was redacted is
	// cancelled with.
	ErrRedacted = errors.New("the message was redacted")
)

// StopCause reports why ctx was cancelled on purpose: a 🛑 reaction
// (cancelled_by_user) or a redaction of the message (redacted). It returns
// a nil error for any other end.
func StopCause(ctx context.Context) (hooks.CancelReason, error) {
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrStopped):
		return hooks.CancelledByUser, ErrStopped
	case errors.Is(cause, ErrRedacted):
		return hooks.CancelRedacted, ErrRedacted
	}
	return "", nil
}

// claim offers the message to message:claim hooks; it reports whether a
// hook answered it (the turn is then over).
func (t *turn) claim(ctx context.Context) bool {
	if !t.reg.Has(hooks.MessageClaim.Name()) {
		return false
	}
	c := &hooks.MessageClaimContext{Envelope: t.env}
	Emit(ctx, t.reg, hooks.MessageClaim, c)
	if c.Claimed == nil {
		return false
	}
	t.log.Info().Msg("message claimed by a hook")
	if strings.TrimSpace(c.Claimed.Text) == "" {
		t.endCancelled(hooks.CancelClaimed, "")
		return true
	}
	t.mu.Lock()
	reply := t.reply // what the last run posted (replays)
	t.mu.Unlock()
	evID, err := t.post(ctx, c.Claimed.Text, reply, "claim", c.Claimed.Extra)
	if err != nil {
		t.fail(ctx, hooks.CancelDeliveryError, err)
		return true
	}
	t.endAnswered(c.Claimed.Text, evID, hooks.DeliverySent, hooks.ResponseSystem, false)
	return true
}

// enrich collects message:enrich and system:enrich items and renders them
// around userText (the message's text with its attachments).
func (t *turn) enrich(ctx context.Context, userText string) (enrich.Turn, error) {
	var msgItems, sysItems []hooks.EnrichmentItem
	if t.reg.Has(hooks.MessageEnrich.Name()) {
		c := &hooks.MessageEnrichContext{Envelope: t.env, TargetAgent: t.agent, TargetMembers: t.targetMembers()}
		if err := hooks.Emit(ctx, t.reg, hooks.MessageEnrich, c); err != nil {
			return enrich.Turn{}, fmt.Errorf("failed to enrich the message: %w", err)
		}
		msgItems = c.Items
	}
	if t.reg.Has(hooks.SystemEnrich.Name()) {
		c := &hooks.SystemEnrichContext{Envelope: t.env, TargetAgent: t.agent, TargetMembers: t.targetMembers()}
		if err := hooks.Emit(ctx, t.reg, hooks.SystemEnrich, c); err != nil {
			return enrich.Turn{}, fmt.Errorf("failed to enrich the system prompt: %w", err)
		}
		sysItems = c.Items
	}
	return enrich.Build(userText, msgItems, sysItems), nil
}

// prompt builds the model's messages: the agent's system prompt (with the
// system-context block), the stored history of this thread, the transient
// block and the enriched user turn with the message's images. It adds the
// notice that the model cannot see images to att's notices when this is
// the first such image of the thread.
func (t *turn) prompt(ctx context.Context, et enrich.Turn, att *preparedAttachments) ([]agents.Message, error) {
	budget := agents.HistoryBudget(t.modelOpt.ContextWindow, 0)
	var summarizer agents.Model
	if t.modelOpt.Summarize {
		summarizer = t.model
	}
	if _, err := t.deps.History.Compact(ctx, agents.CompactRequest{
		Scope: t.scope, Budget: budget, Summarizer: summarizer, Hooks: t.reg,
	}); err != nil {
		t.log.Warn().Err(err).Msg("failed to compact the history; truncating instead")
		if _, err := t.deps.History.Compact(ctx, agents.CompactRequest{Scope: t.scope, Budget: budget}); err != nil {
			return nil, fmt.Errorf("failed to compact the history: %w", err)
		}
	}
	history, err := t.deps.History.Load(ctx, t.scope)
	if err != nil {
		return nil, fmt.Errorf("failed to load the history: %w", err)
	}
	msgs := make([]agents.Message, 0, len(history)+3)
	system, stable := t.systemPrompt(et)
	msgs = append(msgs, agents.Message{Role: agents.RoleSystem, Content: system, StablePrefix: stable})
	msgs = append(msgs, history...)
	// The stored history is replayed byte-exact, so the conversation up to
	// its last message is a stable prefix too: a provider with prompt
	// caching reads it from the cache on the next turn and on every tool
	// round of this one.
	for i := len(msgs) - 1; i > 0; i-- {
		if msgs[i].Content != "" {
			msgs[i].StablePrefix = len(msgs[i].Content)
			break
		}
	}
	if et.Transient != "" {
		msgs = append(msgs, agents.Message{Role: agents.RoleUser, Content: et.Transient})
	}
	if att.blind && !historyTold(history, VisionMarker) {
		att.notices = append([]string{VisionNotice}, att.notices...)
	}
	return append(msgs, agents.Message{Role: agents.RoleUser, Content: et.Prompt, Images: att.images}), nil
}

// tellAttachments tells the person, in one notice before the answer, what
// of their attachments the model does not get and why.
func (t *turn) tellAttachments(ctx context.Context, notices []string) {
	if len(notices) == 0 || t.earlierPart(-1) != "" { // told by the last run
		return
	}
	opts := t.sendOptions("attachments")
	opts.Notice = true
	if _, err := t.sendNew(ctx, -1, "⚠️ "+strings.Join(notices, "\n\n⚠️ "), opts); err != nil {
		t.log.Warn().Err(err).Msg("failed to tell the person about their attachments")
	}
}

func (t *turn) onText(delta string) {
	t.stages.mark(metrics.StageFirstToken)
	t.mu.Lock()
	t.text.WriteString(delta)
	t.mu.Unlock()
}

// stream sends the placeholder once the reply takes longer than
// PlaceholderDelay and then edits it with the text so far, at most once per
// EditInterval, while streaming is on.
func (t *turn) stream(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(cmp.Or(t.deps.PlaceholderDelay, placeholderDelay)):
	}
	// Once started, the placeholder send is not cut short when the reply
	// completes meanwhile: a send cancelled in flight may still have landed,
	// and the reply must then edit it rather than post a second message.
	sendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
	err := t.ensurePlaceholder(sendCtx)
	cancel()
	if err != nil {
		return
	}
	if !t.spec.Streaming {
		return
	}
	tick := time.NewTicker(cmp.Or(t.deps.EditInterval, editInterval))
	defer tick.Stop()
	sent := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		t.mu.Lock()
		text := t.text.String()
		t.mu.Unlock()
		// A reply too long for one event shows its first part while it
		// streams; the rest follows in more messages at the end.
		text, _ = matrixio.FirstPart(text, t.sendOptions(""), true)
		if strings.TrimSpace(text) == "" || text == sent {
			continue
		}
		t.mu.Lock()
		t.edits++
		n := t.edits
		t.mu.Unlock()
		// Like the placeholder, an edit is not cut short when the reply
		// completes: cancelled in flight, it could land after the final
		// edit and leave a partial text showing. The turn waits for it.
		opts := t.editOptions(fmt.Sprintf("edit-%d", n))
		editCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sendTimeout)
		_, err := t.acct.Edit(editCtx, t.env.RoomID, t.reply, text+" "+Placeholder, opts)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				t.log.Warn().Err(err).Msg("failed to edit the streaming reply")
			}
			continue
		}
		sent = text
		t.mu.Lock()
		t.visible = true
		t.mu.Unlock()
		t.stages.mark(metrics.StageFirstVisible)
	}
}

// ensurePlaceholder sends the placeholder unless it was sent already.
func (t *turn) ensurePlaceholder(ctx context.Context) error {
	t.mu.Lock()
	have := t.reply != ""
	t.mu.Unlock()
	if have {
		return nil
	}
	opts := t.sendOptions("placeholder")
	opts.Notice = true
	evID, err := t.sendNew(ctx, 0, Placeholder, opts)
	if err != nil {
		if ctx.Err() == nil {
			t.log.Warn().Err(err).Msg("failed to send the placeholder")
		}
		return err
	}
	t.mu.Lock()
	t.reply = evID
	t.mu.Unlock()
	t.deps.Index.Alias(evID, t.ev.ID)
	return nil
}

// post delivers text as the turn's answer, with extra content fields on
// every message: as an edit of reply when the turn posted one already
// (stage "final"), else as a new message (stage). A text too long for one
// event (matrixio.SplitText) goes on in more messages in the thread,
// stages "<stage>-1", "<stage>-2", …; a replayed turn edits the parts the
// last run recorded instead. Every message posted is recorded. It returns
// the first message; on error, the parts delivered so far stay (t.parts
// counts them).
func (t *turn) post(ctx context.Context, text string, reply id.EventID, stage string, extra map[string]any) (id.EventID, error) {
	opts := t.sendOptions(stage)
	opts.Extra = extra
	parts := matrixio.SplitText(text, opts, reply != "")
	if len(parts) > 1 {
		t.log.Info().Int("parts", len(parts)).Int("bytes", len(text)).Msg("reply too long for one message; sending it in parts")
	}
	first := reply
	for i, part := range parts {
		var err error
		switch {
		case i == 0 && reply != "":
			opts.TxnKey = t.editOptions("final").TxnKey
			_, err = t.acct.Edit(ctx, t.env.RoomID, reply, part, opts)
		case i > 0 && t.earlierPart(i) != "":
			opts.TxnKey = t.editOptions(fmt.Sprintf("final-%d", i)).TxnKey
			_, err = t.acct.Edit(ctx, t.env.RoomID, t.earlierPart(i), part, opts)
		default:
			key := stage
			if i > 0 {
				key = fmt.Sprintf("%s-%d", stage, i)
			}
			opts.TxnKey = matrixio.TxnKey(t.ev.ID, key)
			var evID id.EventID
			if evID, err = t.sendNew(ctx, i, part, opts); err == nil && i == 0 {
				first = evID
			}
		}
		if err != nil {
			return first, fmt.Errorf("failed to deliver part %d of %d: %w", i+1, len(parts), err)
		}
		t.mu.Lock()
		t.parts = i + 1
		t.mu.Unlock()
	}
	return first, nil
}

// earlierPart returns the message the last run posted as part i of the
// reply (replayed turns only), or "".
func (t *turn) earlierPart(i int) id.EventID {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.earlier {
		if r.Part == i {
			return r.EventID
		}
	}
	return ""
}

// sendOptions are the options of every message of the turn: in its thread,
// with a transaction key derived from the source event and the stage.
func (t *turn) sendOptions(stage string) matrixio.SendOptions {
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(t.ev.ID, stage)}
	if t.env.ResolvedThreadID != "" {
		opts.ThreadRoot = t.env.ResolvedThreadID
	} else {
		opts.ReplyTo = t.ev.ID
	}
	return opts
}

// typingNotice shows the agent typing while a turn works. One goroutine
// owns the notice: it sets it, refreshes it before it times out, and
// clears it once ended, in that order, so a late "typing" can never
// overtake the "stopped typing".
//
// Clearing it is not on the reply's critical path: the turn sends its
// reply first, then ends the notice, and the request that clears it runs
// in the background. It must be sent at all: neither Dendrite (v0.15.2,
// syncapi/consumers/typing.go: a user stops typing only on typing=false or
// when the timeout passes) nor Synapse (its typing handler has no hook on
// sent events) clears a typing notice when its user sends a message, so
// without it the agent would seem to type on for up to typingTimeout after
// answering.
//
// Its requests are never cancelled with the turn: mautrix logs a cancelled
// request as a warning, and a typing request is cheap; each is bounded by
// typingRequestTimeout instead. Bot.Run waits for the last ones at
// shutdown.
type typingNotice struct {
	stop chan struct{}
	once sync.Once
}

// startTyping shows the agent typing in the turn's room until endTyping.
func (t *turn) startTyping(ctx context.Context) *typingNotice {
	n := &typingNotice{stop: make(chan struct{})}
	reqCtx := context.WithoutCancel(ctx)
	set := func(on bool) {
		ctx, cancel := context.WithTimeout(reqCtx, typingRequestTimeout)
		defer cancel()
		t.setTyping(ctx, on)
	}
	t.deps.Typing.Go(func() {
		set(true)
		for {
			select {
			case <-n.stop:
				set(false)
				return
			case <-time.After(typingTimeout / 2):
				set(true)
			}
		}
	})
	return n
}

// endTyping clears the typing notice in the background. It is called
// right after the reply (or the failure notice) was sent, and again when
// the turn ends, whichever way; only the first call counts.
func (t *turn) endTyping() {
	if t.typing != nil {
		t.typing.once.Do(func() { close(t.typing.stop) })
	}
}

func (t *turn) setTyping(ctx context.Context, on bool) {
	if err := t.acct.SetTyping(ctx, t.env.RoomID, on, typingTimeout); err != nil && ctx.Err() == nil {
		t.log.Debug().Err(err).Msg("failed to set typing")
	}
}

// deliver runs the response transformers, sends or edits the final reply,
// stores the turn and fires message:after_response.
func (t *turn) deliver(ctx context.Context, et enrich.Turn, res *agents.RunResult) {
	t.mu.Lock()
	visible, reply := t.visible, t.reply
	t.mu.Unlock()
	text := res.Text
	if !visible {
		c := &hooks.BeforeResponseContext{Draft: hooks.ResponseDraft{
			Text: text, Kind: t.responseKind(), ToolTrace: res.ToolTrace, Envelope: t.env,
		}}
		Emit(ctx, t.reg, hooks.MessageBeforeResponse, c)
		if c.Draft.Suppress {
			t.log.Info().Msg("reply suppressed by a message:before_response hook")
			if reply != "" {
				if _, err := t.acct.Redact(ctx, t.env.RoomID, reply, "suppressed"); err != nil {
					t.log.Warn().Err(err).Msg("failed to remove the placeholder")
				}
			}
			t.endCancelled(hooks.CancelSuppressed, "")
			return
		}
		text = c.Draft.Text
	} else {
		c := &hooks.FinalResponseContext{Draft: hooks.FinalDraft{Text: text, Kind: t.responseKind(), Envelope: t.env}}
		Emit(ctx, t.reg, hooks.MessageFinalResponseTransform, c)
		text = c.Draft.Text
	}
	if strings.TrimSpace(text) == "" {
		text = "(no answer)"
	}
	kind := hooks.DeliverySent
	if reply != "" {
		kind = hooks.DeliveryEdited
	}
	evID, err := t.post(ctx, text, reply, "reply", nil)
	if err != nil {
		t.fail(ctx, hooks.CancelDeliveryError, err) // ends typing after its notice
		return
	}
	t.endTyping() // after the reply: in the background, off its path
	t.stages.mark(metrics.StageFirstVisible)
	t.stages.mark(metrics.StageFinal)
	// The stored turn is the enriched prompt and what the model said, with
	// the delivered text as the final answer. The prompt holds the text of
	// the message's text files and a line naming each other file, but not
	// its images: an image goes to the model with the turn it arrives in
	// only, and later requests of the thread replay the stored text, which
	// names it. That keeps megabytes of image data out of the database and
	// out of every later request, and a replay still sends exactly what is
	// stored.
	msgs := append([]agents.Message{{Role: agents.RoleUser, Content: et.Prompt}}, res.Messages...)
	if n := len(msgs); n > 1 && msgs[n-1].Role == agents.RoleAssistant {
		msgs[n-1].Content = text
	}
	// The turn is stored and its message marked handled in one
	// transaction (the history's write lock first, then the database's).
	// Its token usage is recorded in the same transaction.
	newSession, err := t.deps.History.AppendTurn(context.WithoutCancel(ctx), t.scope, t.agent, t.ev.ID, t.handled, msgs...)
	stored := err == nil
	if err != nil {
		// The reply is out: the message is still marked handled (by
		// finish), so it is not answered again, but the thread's history
		// lacks this turn.
		t.log.Error().Err(err).Msg("failed to store the turn")
	}
	if newSession && t.reg.Has(hooks.SessionStarted.Name()) {
		if s, err := t.deps.History.Session(ctx, t.scope); err == nil && s != nil {
			c := &hooks.SessionContext{Agent: t.agent, SessionID: string(t.scope), HistoryID: s.ID, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID}
			Emit(ctx, t.reg, hooks.SessionStarted, c)
		}
	}
	t.log.Info().Str("delivery", string(kind)).Int("tool_calls", len(res.ToolTrace)).Msg("answered")
	t.endAnswered(text, evID, kind, t.responseKind(), stored)
}

// markHandled marks the message handled (a turn that stores nothing),
// recording what its model calls used, if any.
func (t *turn) markHandled(ctx context.Context) error {
	return t.handled(context.WithoutCancel(ctx))
}

// fail ends the turn with a short notice in the thread and
// message:cancelled. A turn stopped on purpose (🛑, a redaction) ends with
// that reason, whichever step noticed the stop and whatever reason it
// passed. A redacted message gets no notice: its thread's queue then runs
// forgetTurn, which also removes the placeholder.
func (t *turn) fail(ctx context.Context, reason hooks.CancelReason, err error) {
	level := zerolog.WarnLevel
	if r, cause := StopCause(ctx); cause != nil {
		reason, err, level = r, cause, zerolog.InfoLevel // a person's choice, not a fault
	} else if ctx.Err() != nil {
		level = zerolog.InfoLevel // hookroom is stopping (or the agent was removed): not a fault
	}
	ctx = context.WithoutCancel(ctx)
	t.log.WithLevel(level).Err(err).Str("reason", string(reason)).Msg("turn failed")
	var notice string
	switch reason {
	case hooks.CancelledByUser:
		notice = StopKey + " Stopped."
	case hooks.CancelRedacted:
		notice = ""
	case hooks.CancelModelError:
		notice = "⚠️ Sorry, I could not answer: " + userError(err)
	case hooks.CancelDeliveryError:
		notice = "⚠️ Sorry, I could not deliver the answer."
	default:
		notice = "⚠️ Sorry, something went wrong while preparing the answer."
	}
	t.mu.Lock()
	reply := t.reply
	partial := t.text.String()
	delivered := t.parts
	t.mu.Unlock()
	if notice != "" {
		opts := t.editOptions("failed")
		// Parts of the answer already delivered stay; the notice follows
		// them. Otherwise it replaces the placeholder, if there is one.
		edit := reply != "" && delivered == 0
		if reason == hooks.CancelledByUser && strings.TrimSpace(partial) != "" {
			shown, _ := matrixio.FirstPart(partial, opts, edit)
			notice = shown + "\n\n" + notice
		}
		var sendErr error
		if edit {
			_, sendErr = t.acct.Edit(ctx, t.env.RoomID, reply, notice, opts)
		} else {
			var evID id.EventID
			opts.TxnKey = t.sendOptions("failed").TxnKey
			if evID, sendErr = t.sendNew(ctx, delivered, notice, opts); reply == "" {
				reply = evID
			}
		}
		if sendErr != nil {
			t.log.Warn().Err(sendErr).Msg("failed to tell the person about the failure")
		}
	}
	t.endTyping()
	t.mu.Lock()
	t.reply = reply
	t.mu.Unlock()
	t.endCancelled(reason, err.Error())
}

// userError is what a person sees of a model error: short, without
// internals.
func userError(err error) string {
	if errors.Is(err, errTurnTimeout) {
		return fmt.Sprintf("it took longer than %s.", turnTimeout)
	}
	var refused *agents.RefusedError
	if errors.As(err, &refused) {
		return refused.Reason
	}
	var me *agents.ModelError
	if errors.As(err, &me) {
		switch {
		case me.Kind == agents.ErrorTimeout:
			return "the model took too long."
		case me.StatusCode == 429:
			return "the model is busy (rate limited); try again in a moment."
		case me.StatusCode == 401 || me.StatusCode == 403:
			return "the model rejected hookroom's credentials."
		case me.Retryable:
			return "the model is unavailable right now; try again in a moment."
		}
		return "the model returned an error."
	}
	if errors.Is(err, agents.ErrToolIterations) {
		return "it needed too many tool calls."
	}
	return "the model call failed."
}

func (t *turn) cancelled(ctx context.Context, reason hooks.CancelReason, detail string) {
	t.stages.end(string(reason))
	ctx = context.WithoutCancel(ctx)
	if !t.reg.Has(hooks.MessageCancelled.Name()) {
		return
	}
	t.mu.Lock()
	reply := t.reply
	t.mu.Unlock()
	c := &hooks.CancelledContext{Info: hooks.CancelledInfo{
		Envelope: t.env, VisibleEventID: reply, Kind: t.responseKind(), Reason: reason, Detail: detail,
		Usage: t.tokenUsage(),
	}}
	Emit(ctx, t.reg, hooks.MessageCancelled, c)
}

func (t *turn) afterResponse(ctx context.Context, text string, evID id.EventID, kind hooks.DeliveryKind, rk hooks.ResponseKind) {
	t.stages.end(responseOutcome(rk))
	ctx = context.WithoutCancel(ctx)
	if !t.reg.Has(hooks.MessageAfterResponse.Name()) {
		return
	}
	c := &hooks.AfterResponseContext{Result: hooks.ResponseResult{
		Text: text, EventID: evID, DeliveryKind: kind, Kind: rk, Envelope: t.env, Usage: t.tokenUsage(),
	}}
	Emit(ctx, t.reg, hooks.MessageAfterResponse, c)
}

// systemPrompt is the agent's system prompt for one run, and how many of
// its leading bytes stay the same from turn to turn: the agent's own
// prompt and the block's stable items (et.SystemStable). Providers with
// prompt caching cache up to there.
func (t *turn) systemPrompt(et enrich.Turn) (string, int) {
	s := t.spec.Persona.System(t.agent)
	stable := len(s)
	if et.System != "" {
		s += "\n\n" + et.System
		if et.SystemStable > 0 {
			stable += len("\n\n") + et.SystemStable
		}
	}
	return s, stable
}

// System is the system prompt of agent with persona p, before any
// system-enrichment block: who it is, its role and its instructions. A
// team member or a delegated run gets the same.
func (p Persona) System(agent hooks.AgentName) string {
	var s strings.Builder
	fmt.Fprintf(&s, "You are %s, an assistant in a Matrix chat room.", cmp.Or(p.DisplayName, string(agent)))
	if p.Role != "" {
		s.WriteString(" Your role: " + strings.TrimSpace(p.Role))
	}
	if p.Instructions != "" {
		s.WriteString("\n\n" + strings.TrimSpace(p.Instructions))
	}
	return s.String()
}
