package hooks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// DefaultPriority is the priority of a hook that does not set one. Lower
// priorities run first.
const DefaultPriority = 100

// FailurePolicy says what a failing gate hook means.
type FailurePolicy uint8

const (
	// FailOpen (the default) ignores a gate hook that fails or times out:
	// the tool call goes ahead as if the hook had allowed it.
	FailOpen FailurePolicy = iota
	// FailClosed turns a failing gate hook into a decline that says the
	// gate was unavailable.
	FailClosed
)

func (p FailurePolicy) String() string {
	if p == FailClosed {
		return "closed"
	}
	return "open"
}

// ParseFailurePolicy parses "open" or "closed".
func ParseFailurePolicy(s string) (FailurePolicy, error) {
	switch s {
	case "open":
		return FailOpen, nil
	case "closed":
		return FailClosed, nil
	}
	return FailOpen, fmt.Errorf("invalid failure policy %q: want open or closed", s)
}

// AnyHandler is a handler that accepts the context of any event. Process
// plugins use it: the host marshals the context to JSON, and only the
// event's designated mutable fields of the copy it gets back count.
type AnyHandler func(ctx context.Context, c Context) error

// Hook is one handler a plugin declares, made with Handle or HandleAny.
// Declaring a hook has no side effect; it runs once a registry built from
// its plugin is in service.
type Hook struct {
	event    *eventInfo
	name     string
	priority int
	timeout  time.Duration // 0: the event's default
	agents   []AgentName
	rooms    []id.RoomID
	policy   FailurePolicy
	inline   bool
	fn       any
	err      error
}

// Option configures a hook at declaration.
type Option func(*Hook)

// Priority sets the hook's priority (default 100; lower runs first).
func Priority(p int) Option { return func(h *Hook) { h.priority = p } }

// Timeout sets the hook's deadline, overriding the event's default.
func Timeout(d time.Duration) Option {
	return func(h *Hook) {
		if d <= 0 {
			h.err = errors.Join(h.err, fmt.Errorf("timeout must be positive, got %v", d))
			return
		}
		h.timeout = d
	}
}

// Agents runs the hook only for contexts of the named agents.
func Agents(names ...AgentName) Option {
	return func(h *Hook) { h.agents = cleanList(h.agents, names) }
}

// Rooms runs the hook only for contexts in the given rooms (room ids, not aliases).
func Rooms(rooms ...id.RoomID) Option {
	return func(h *Hook) { h.rooms = cleanList(h.rooms, rooms) }
}

// Inline runs the hook on the emitting goroutine instead of handing it to a
// worker: the fast path for hooks that never block (pure computation on the
// context, no I/O, no locks that can be held for long, no waiting on the
// context). An inline hook keeps its own copy of the context, its deadline
// (a run that ends at or after it counts as a timeout and its effects are
// dropped) and panic recovery; it gives up only abandonment: an inline hook
// that blocks blocks the emission, and with it the turn or tool call that
// emitted the event, until it returns. Built-in gates and enrichers use
// it; never use it for a hook that does I/O.
func Inline() Option { return func(h *Hook) { h.inline = true } }

// WithFailurePolicy sets the failure policy of a gate hook.
func WithFailurePolicy(p FailurePolicy) Option { return func(h *Hook) { h.policy = p } }

func cleanList[S ~string](dst, src []S) []S {
	for _, s := range src {
		if s = S(strings.TrimSpace(string(s))); s != "" {
			dst = append(dst, s)
		}
	}
	return dst
}

// Handle declares a hook named name that runs fn for event ev. The types
// tie fn to the event: a handler for MessageReceived must accept a
// *MessageReceivedContext.
func Handle[T any](ev Event[T], name string, fn func(context.Context, *T) error, opts ...Option) Hook {
	h := Hook{event: ev.info, name: name, priority: DefaultPriority, fn: fn}
	if ev.info == nil {
		h.err = errors.New("zero Event value")
	}
	for _, o := range opts {
		o(&h)
	}
	return h
}

// HandleAny declares a hook for the event called event (built-in or custom)
// whose handler accepts any context. An invalid event name is reported when
// the registry is built.
func HandleAny(event, name string, fn AnyHandler, opts ...Option) Hook {
	h := Hook{name: name, priority: DefaultPriority, fn: fn}
	info, err := lookupEvent(event)
	if err != nil {
		h.err = err
		info = &eventInfo{name: event, mode: Observer, timeout: CustomTimeout}
	}
	h.event = info
	for _, o := range opts {
		o(&h)
	}
	return h
}

// Name returns the hook's name.
func (h Hook) Name() string { return h.name }

// Event returns the name of the hook's event.
func (h Hook) Event() string {
	if h.event == nil {
		return ""
	}
	return h.event.name
}
