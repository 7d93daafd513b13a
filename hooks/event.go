package hooks

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Mode is how the hooks of one event run. The event decides the mode; a hook
// never does.
type Mode uint8

const (
	// Observer hooks run serially in order. They read the context and may set
	// the event's designated mutable fields (Suppress on message:received,
	// MessageText and Suppress on schedule:fired). Later hooks see the
	// changes of earlier hooks that succeeded.
	Observer Mode = iota + 1
	// Collector hooks run concurrently (bounded per emission) and add
	// enrichment items; the items are merged in hook order.
	Collector
	// Transformer hooks run serially, each on its own copy of the draft; a
	// hook that succeeds hands its draft to the next.
	Transformer
	// Gate hooks run serially; the first decline stops the chain. A failing
	// gate is ignored unless its failure policy is closed.
	Gate
	// Claim hooks run serially; the first hook that claims the message
	// answers it instead of the model and stops the chain.
	Claim
)

var modeNames = [...]string{Observer: "observer", Collector: "collector", Transformer: "transformer", Gate: "gate", Claim: "claim"}

func (m Mode) String() string {
	if int(m) < len(modeNames) && modeNames[m] != "" {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", m)
}

// scope says which filters can ever match an event's contexts.
type scope uint8

const (
	scopeAgent scope = 1 << iota // the context names an agent: agents= filters apply
	scopeRoom                    // the context names a room: rooms= filters apply
)

// eventInfo is the static description of an event. Built-in events have a
// small index used for constant-time registry lookups.
type eventInfo struct {
	name    string
	mode    Mode
	timeout time.Duration
	scope   scope
	index   int // 1-based index of a built-in event; 0 for custom events
	// runs keeps the *serialRun[T, P] of finished all-Inline emissions
	// for reuse (T is fixed per event).
	runs sync.Pool
}

// Event identifies an event whose hooks receive a *T. The type parameter is
// what makes registration type-safe: a handler for Event[T] must accept *T.
type Event[T any] struct {
	info *eventInfo
}

// Name returns the event's name, e.g. "message:received".
func (e Event[T]) Name() string { return e.info.name }

// Mode returns the event's execution mode.
func (e Event[T]) Mode() Mode { return e.info.mode }

// DefaultTimeout returns the deadline a hook gets when neither the hook nor
// config.yaml sets one.
func (e Event[T]) DefaultTimeout() time.Duration { return e.info.timeout }

func (e Event[T]) String() string { return e.info.name }

// CustomTimeout is the default deadline of hooks on custom events.
const CustomTimeout = 1000 * time.Millisecond

var builtins []*eventInfo

func builtin[T any](name string, mode Mode, timeoutMS int, sc scope) Event[T] {
	info := &eventInfo{name: name, mode: mode, timeout: time.Duration(timeoutMS) * time.Millisecond, scope: sc, index: len(builtins) + 1}
	builtins = append(builtins, info)
	return Event[T]{info: info}
}

// The built-in events. The comment on each context type says when its event
// fires and which of its fields a hook may change.
var (
	MessageReceived               = builtin[MessageReceivedContext]("message:received", Observer, 15000, scopeAgent|scopeRoom)
	MessageClaim                  = builtin[MessageClaimContext]("message:claim", Claim, 1000, scopeAgent|scopeRoom)
	MessageEnrich                 = builtin[MessageEnrichContext]("message:enrich", Collector, 2000, scopeAgent|scopeRoom)
	SystemEnrich                  = builtin[SystemEnrichContext]("system:enrich", Collector, 2000, scopeAgent|scopeRoom)
	MessageBeforeResponse         = builtin[BeforeResponseContext]("message:before_response", Transformer, 200, scopeAgent|scopeRoom)
	MessageFinalResponseTransform = builtin[FinalResponseContext]("message:final_response_transform", Transformer, 200, scopeAgent|scopeRoom)
	MessageAfterResponse          = builtin[AfterResponseContext]("message:after_response", Observer, 3000, scopeAgent|scopeRoom)
	MessageCancelled              = builtin[CancelledContext]("message:cancelled", Observer, 3000, scopeAgent|scopeRoom)
	AgentStarted                  = builtin[AgentLifecycleContext]("agent:started", Observer, 5000, scopeAgent|scopeRoom)
	AgentStopped                  = builtin[AgentLifecycleContext]("agent:stopped", Observer, 5000, scopeAgent|scopeRoom)
	BotReady                      = builtin[AgentLifecycleContext]("bot:ready", Observer, 5000, scopeAgent|scopeRoom)
	SessionStarted                = builtin[SessionContext]("session:started", Observer, 5000, scopeAgent|scopeRoom)
	CompactionBefore              = builtin[CompactionContext]("compaction:before", Observer, 15000, scopeAgent|scopeRoom)
	CompactionAfter               = builtin[CompactionContext]("compaction:after", Observer, 5000, scopeAgent|scopeRoom)
	ScheduleFired                 = builtin[ScheduleFiredContext]("schedule:fired", Observer, 1000, scopeRoom)
	ReactionReceived              = builtin[ReactionReceivedContext]("reaction:received", Observer, 500, scopeAgent|scopeRoom)
	RoomMemberJoined              = builtin[RoomMemberContext]("room:member_joined", Observer, 3000, scopeRoom)
	RoomMemberLeft                = builtin[RoomMemberContext]("room:member_left", Observer, 3000, scopeRoom)
	ConfigReloaded                = builtin[ConfigReloadedContext]("config:reloaded", Observer, 5000, 0)
	ToolBeforeCall                = builtin[ToolBeforeCallContext]("tool:before_call", Gate, 200, scopeAgent|scopeRoom)
	ToolAfterCall                 = builtin[ToolAfterCallContext]("tool:after_call", Observer, 300, scopeAgent|scopeRoom)
	ToolApprovalRequested         = builtin[ToolApprovalRequestedContext]("tool:approval_requested", Gate, 2000, scopeAgent|scopeRoom)
	ToolApprovalResolved          = builtin[ToolApprovalResolvedContext]("tool:approval_resolved", Observer, 1000, scopeAgent|scopeRoom)
	PluginBeforeInstall           = builtin[PluginInstallContext]("plugin:before_install", Gate, 5000, 0)
	ModelResolve                  = builtin[ModelResolveContext]("model:resolve", Transformer, 1000, scopeAgent|scopeRoom)
	ModelRequest                  = builtin[ModelRequestContext]("model:request", Transformer, 1000, scopeAgent|scopeRoom)
	ModelResponse                 = builtin[ModelResponseContext]("model:response", Observer, 1000, scopeAgent|scopeRoom)
	ToolResult                    = builtin[ToolResultContext]("tool:result", Transformer, 500, scopeAgent|scopeRoom)
	UsageBudgetReached            = builtin[BudgetReachedContext]("usage:budget_reached", Observer, 3000, scopeAgent|scopeRoom)
	SubagentSpawned               = builtin[SubagentContext]("subagent:spawned", Observer, 1000, scopeAgent|scopeRoom)
	SubagentEnded                 = builtin[SubagentContext]("subagent:ended", Observer, 1000, scopeAgent|scopeRoom)
	MemoryExtracted               = builtin[MemoryExtractedContext]("memory:extracted", Transformer, 2000, scopeAgent|scopeRoom)
)

var builtinByName = func() map[string]*eventInfo {
	m := make(map[string]*eventInfo, len(builtins))
	for _, b := range builtins {
		m[b.name] = b
	}
	return m
}()

// BuiltinEvents lists the names of every built-in event in declaration order.
func BuiltinEvents() []string {
	names := make([]string, len(builtins))
	for i, b := range builtins {
		names[i] = b.name
	}
	return names
}

// ReservedNamespaces are the first segments that custom events may not use.
var ReservedNamespaces = []string{"message", "system", "agent", "bot", "compaction", "schedule", "reaction", "room", "config", "session", "tool", "plugin", "model", "usage", "subagent", "memory"}

var customEventPattern = regexp.MustCompile(`^[a-z0-9_.-]+(:[a-z0-9_.-]+)+$`)

// ValidateEventName reports whether name is a built-in event or a valid
// custom event name: lowercase segments of [a-z0-9_.-] separated by colons,
// at least two segments, and a first segment outside ReservedNamespaces.
func ValidateEventName(name string) error {
	if _, ok := builtinByName[name]; ok {
		return nil
	}
	if !customEventPattern.MatchString(name) {
		return fmt.Errorf("invalid event name %q: want lowercase segments of [a-z0-9_.-] joined by ':', e.g. \"todo:item_completed\"", name)
	}
	ns, _, _ := strings.Cut(name, ":")
	for _, r := range ReservedNamespaces {
		if ns == r {
			return fmt.Errorf("invalid event name %q: namespace %q is reserved for built-in events", name, ns)
		}
	}
	return nil
}

// lookupEvent returns the description of a built-in event, or a fresh
// description of a custom event, or an error for an invalid name.
func lookupEvent(name string) (*eventInfo, error) {
	if b, ok := builtinByName[name]; ok {
		return b, nil
	}
	if err := ValidateEventName(name); err != nil {
		return nil, err
	}
	return &eventInfo{name: name, mode: Observer, timeout: CustomTimeout, scope: scopeAgent | scopeRoom}, nil
}

// NewCustomEvent returns the event with the given custom name. Custom events
// run in observer mode with a 1 s default deadline; their hooks receive a
// *CustomEventContext.
func NewCustomEvent(name string) (Event[CustomEventContext], error) {
	if _, ok := builtinByName[name]; ok {
		return Event[CustomEventContext]{}, fmt.Errorf("invalid custom event name %q: it is a built-in event", name)
	}
	info, err := lookupEvent(name)
	if err != nil {
		return Event[CustomEventContext]{}, err
	}
	return Event[CustomEventContext]{info: info}, nil
}

// MustCustomEvent is NewCustomEvent for package-level variables; it panics on
// an invalid name.
func MustCustomEvent(name string) Event[CustomEventContext] {
	ev, err := NewCustomEvent(name)
	if err != nil {
		panic(err)
	}
	return ev
}
