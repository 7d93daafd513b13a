package trace

import (
	"context"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Stage names, in the order a turn passes them.
const (
	StageReceived     = "received"
	StageRouted       = "routed"
	StageFirstToken   = "first_token"
	StageFirstVisible = "first_visible"
	StageFinal        = "final"
)

// Outcomes of a turn besides the message:cancelled reasons (which a turn
// that did not answer ends with: "suppressed", "stopped", "error", …).
const (
	OutcomeResponded = "responded"
	OutcomeClaimed   = "claimed"
)

// Hook effects: what one hook run did to its event, as the inspector shows
// it. A run that did not return successfully before its deadline has one of
// the failure effects and changed nothing.
const (
	EffectUnchanged        = "unchanged"
	EffectChanged          = "changed"
	EffectSuppressed       = "suppressed"
	EffectClaimed          = "claimed"
	EffectDeclined         = "declined"
	EffectApprovalRequired = "approval_required"
	EffectFailed           = "failed"
	EffectTimedOut         = "timed_out"
	EffectAbandoned        = "abandoned"
)

// Trace is the record of one turn: one agent's answer to one message.
type Trace struct {
	// ID is the store's id (0 until saved).
	ID int64 `json:"id"`
	// EventID is the person's message the turn answered.
	EventID  id.EventID      `json:"event_id"`
	Agent    hooks.AgentName `json:"agent"`
	RoomID   id.RoomID       `json:"room_id"`
	ThreadID id.EventID      `json:"thread_id,omitempty"`
	Sender   id.UserID       `json:"sender"`
	// CorrelationID is the id the turn's log lines and hook contexts carry.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Replayed is set for a turn run again after a restart.
	Replayed bool      `json:"replayed,omitempty"`
	Started  time.Time `json:"started"`
	Ended    time.Time `json:"ended"`
	// Outcome is OutcomeResponded, OutcomeClaimed or the message:cancelled
	// reason; Detail says more where there is more to say.
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
	// Tokens are the tokens the turn's model requests used, summed.
	Tokens int `json:"tokens"`

	Stages    []Stage     `json:"stages,omitempty"`
	Hooks     []HookRun   `json:"hooks,omitempty"`
	Models    []ModelCall `json:"models,omitempty"`
	Tools     []ToolCall  `json:"tools,omitempty"`
	Approvals []Approval  `json:"approvals,omitempty"`
	Delivery  []Delivery  `json:"delivery,omitempty"`
	// Dropped counts the entries left out because a list was full
	// (Limits); 0 for almost every turn.
	Dropped int `json:"dropped,omitempty"`
}

// Duration is how long the turn took, from its message's arrival.
func (t *Trace) Duration() time.Duration { return t.Ended.Sub(t.Started) }

// Stage is a point a turn reached, at an offset from its start.
type Stage struct {
	Name string        `json:"name"`
	At   time.Duration `json:"at"`
}

// HookRun is one hook run during the turn.
type HookRun struct {
	Event  string `json:"event"`
	Plugin string `json:"plugin"`
	Hook   string `json:"hook"`
	// Mode is the event's execution mode (observer, collector, …).
	Mode string `json:"mode"`
	// At is when the run ended, from the turn's start.
	At       time.Duration `json:"at"`
	Duration time.Duration `json:"duration"`
	// Effect is one of the Effect constants.
	Effect string `json:"effect"`
	// Change is a short description of what the hook changed in the
	// event's designated fields ("response_text: 'Hi' → 'Hello'"); Error
	// is what a failed run returned.
	Change string `json:"change,omitempty"`
	Error  string `json:"error,omitempty"`
}

// ModelCall is one request to the model.
type ModelCall struct {
	Model string `json:"model"`
	// At is when the request was sent, from the turn's start.
	At               time.Duration `json:"at"`
	Latency          time.Duration `json:"latency"`
	PromptTokens     int           `json:"prompt_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	CachedTokens     int           `json:"cached_tokens,omitempty"`
	FinishReason     string        `json:"finish_reason,omitempty"`
	Error            string        `json:"error,omitempty"`
}

// ToolCall is one tool call the model asked for.
type ToolCall struct {
	Name string `json:"name"`
	// Arguments and Result are as the model sent and received them, cut
	// to Limits.Text, with secrets masked before they are recorded.
	Arguments string        `json:"arguments,omitempty"`
	Result    string        `json:"result,omitempty"`
	At        time.Duration `json:"at"`
	Duration  time.Duration `json:"duration"`
	// Declined is set when tool:before_call (or a person) refused the call;
	// Reason says why.
	Declined bool   `json:"declined,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Approval is one human approval the turn asked for.
type Approval struct {
	ID   string `json:"id"`
	Tool string `json:"tool"`
	// Decision is "approved", "denied" or "expired"; DecidedBy who decided.
	Decision  string        `json:"decision"`
	DecidedBy id.UserID     `json:"decided_by,omitempty"`
	At        time.Duration `json:"at"`
}

// Delivery kinds.
const (
	DeliveryPlaceholder = "placeholder"
	DeliveryMessage     = "message"
	DeliveryEdit        = "edit"
	DeliveryRedact      = "redact"
)

// Delivery is one message, edit or redaction the turn sent to the room.
type Delivery struct {
	Kind    string        `json:"kind"`
	EventID id.EventID    `json:"event_id,omitempty"`
	At      time.Duration `json:"at"`
}

// Limits bound what one trace holds.
type Limits struct {
	// Entries is the most entries each list (hooks, model calls, tool
	// calls, approvals, deliveries) keeps; later ones are counted in
	// Trace.Dropped.
	Entries int
	// Text is the most bytes kept of any one text (a change, arguments, a
	// result, an error).
	Text int
}

// DefaultLimits are the limits of a Recorder made by NewRecorder.
var DefaultLimits = Limits{Entries: 200, Text: 2048}

// Recorder collects one turn's trace. Its methods are safe for concurrent
// use (hooks report from their own goroutines) and do nothing on a nil
// *Recorder.
type Recorder struct {
	mu     sync.Mutex
	t      Trace
	limits Limits
	done   bool
}

// NewRecorder starts the trace of a turn whose message arrived at started
// (its StageReceived), with DefaultLimits.
func NewRecorder(t Trace, started time.Time) *Recorder {
	t.Started = started
	t.Stages = []Stage{{Name: StageReceived}}
	return &Recorder{t: t, limits: DefaultLimits}
}

// Fork starts the trace of a turn with what r recorded so far (the hooks
// and model requests that ran for its message before the turn began:
// message:received, the router), keeping r's start. r itself is left as it
// is, so that each turn a message starts gets a trace of its own. A nil r
// forks nothing: Fork returns nil.
func (r *Recorder) Fork(t Trace) *Recorder {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t.Started = r.t.Started
	t.Stages = slices.Clone(r.t.Stages)
	t.Hooks = slices.Clone(r.t.Hooks)
	t.Models = slices.Clone(r.t.Models)
	t.Tools = slices.Clone(r.t.Tools)
	t.Approvals = slices.Clone(r.t.Approvals)
	t.Delivery = slices.Clone(r.t.Delivery)
	t.Tokens, t.Dropped = r.t.Tokens, r.t.Dropped
	return &Recorder{t: t, limits: r.limits}
}

type recorderKey struct{}

// WithRecorder returns ctx carrying r.
func WithRecorder(ctx context.Context, r *Recorder) context.Context {
	return context.WithValue(ctx, recorderKey{}, r)
}

// From returns the Recorder ctx carries, or nil.
func From(ctx context.Context) *Recorder {
	r, _ := ctx.Value(recorderKey{}).(*Recorder)
	return r
}

// since is now's offset from the turn's start.
func (r *Recorder) since() time.Duration { return time.Since(r.t.Started) }

// Since is now's offset from the turn's start (0 for a nil Recorder).
func (r *Recorder) Since() time.Duration {
	if r == nil {
		return 0
	}
	return r.since()
}

// Stage records that the turn reached stage now, unless it was recorded
// already.
func (r *Recorder) Stage(name string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	for _, s := range r.t.Stages {
		if s.Name == name {
			return
		}
	}
	r.t.Stages = append(r.t.Stages, Stage{Name: name, At: r.since()})
}

// Hook records a finished hook run; its At is now.
func (r *Recorder) Hook(h HookRun) {
	if r == nil {
		return
	}
	h.At = r.since()
	h.Change, h.Error = r.cut(h.Change), r.cut(h.Error)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full(len(r.t.Hooks)) {
		return
	}
	r.t.Hooks = append(r.t.Hooks, h)
}

// Model records a finished model request.
func (r *Recorder) Model(m ModelCall) {
	if r == nil {
		return
	}
	m.Error = r.cut(m.Error)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done {
		return
	}
	r.t.Tokens += m.PromptTokens + m.CompletionTokens
	if r.full(len(r.t.Models)) {
		return
	}
	r.t.Models = append(r.t.Models, m)
}

// Tool records a finished (or declined) tool call.
func (r *Recorder) Tool(c ToolCall) {
	if r == nil {
		return
	}
	c.Arguments, c.Result, c.Reason, c.Error = r.cut(c.Arguments), r.cut(c.Result), r.cut(c.Reason), r.cut(c.Error)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full(len(r.t.Tools)) {
		return
	}
	r.t.Tools = append(r.t.Tools, c)
}

// Approval records an approval's decision; its At is now.
func (r *Recorder) Approval(a Approval) {
	if r == nil {
		return
	}
	a.At = r.since()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full(len(r.t.Approvals)) {
		return
	}
	r.t.Approvals = append(r.t.Approvals, a)
}

// Delivered records a message, edit or redaction sent to the room now.
func (r *Recorder) Delivered(kind string, ev id.EventID) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.full(len(r.t.Delivery)) {
		return
	}
	r.t.Delivery = append(r.t.Delivery, Delivery{Kind: kind, EventID: ev, At: r.since()})
}

// Finish ends the trace with the turn's outcome and returns it. Later
// calls of any method change nothing; a second Finish returns the same
// trace. A nil Recorder returns nil.
func (r *Recorder) Finish(outcome, detail string) *Trace {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.done = true
		r.t.Ended = r.t.Started.Add(r.since())
		r.t.Outcome, r.t.Detail = outcome, r.cut(detail)
	}
	t := r.t
	return &t
}

// full reports whether a list of n entries is full, counting the entry
// that is left out. r.mu is held.
func (r *Recorder) full(n int) bool {
	if r.done {
		return true
	}
	if n >= r.limits.Entries {
		r.t.Dropped++
		return true
	}
	return false
}

// cut shortens s to the text limit on a UTF-8 boundary, marking the cut.
func (r *Recorder) cut(s string) string { return Cut(s, r.limits.Text) }

// Cut returns s shortened to at most n bytes on a UTF-8 boundary, ending in
// "…" when it was shortened.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ell = "…"
	n -= len(ell)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ell
}
