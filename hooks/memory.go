package hooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/id"
)

// The check of memory:extracted (see checker).
var _ checker[MemoryExtractedContext] = (*MemoryExtractedContext)(nil)

// ExtractedMemory is one fact the memory plugin's extraction proposes to
// store: its text, and whose memory it would be. Scope is "person" (a
// memory about Person, recalled only for them), "room" (recalled in Room)
// or "agent" (recalled for anyone Agent answers); the memory belongs to
// Agent.
type ExtractedMemory struct {
	Text   string    `json:"text"`
	Scope  string    `json:"scope"`
	Person id.UserID `json:"person,omitempty"`
	Agent  AgentName `json:"agent"`
	Room   id.RoomID `json:"room,omitempty"`
}

// MemoryExtractedContext is passed to memory:extracted hooks (transformer,
// 2 s). It fires after the memory plugin's extraction (the hook
// memory/extract on message:after_response) asked the extract model for
// durable facts and got some, before any is stored: Memories are the
// candidates, as they would be stored. Where names the turn they were
// read from.
//
// A hook may drop memories, edit their Text, or Veto all of them: what
// the last successful hook left is stored, nothing else; an empty list
// stores nothing. Veto stops the chain. A hook that leaves a memory with
// empty text, or one whose scope, person, agent or room is not one of the
// candidates' it got (a hook cannot move a fact into someone else's
// memory), fails: it is logged and counted as an error and its changes are
// dropped, like those of a hook that errs or times out (the previous list
// goes on). When the hooks cannot run at all (the recursion limit), the
// memory plugin stores nothing.
type MemoryExtractedContext struct {
	Base
	Where
	Memories []ExtractedMemory `json:"memories"`
	// Vetoed, set with Veto, stores nothing and stops the chain;
	// VetoReason is logged.
	Vetoed     bool   `json:"vetoed"`
	VetoReason string `json:"veto_reason,omitempty"`
}

// Veto stores none of the memories and stops the chain; reason is logged.
func (c *MemoryExtractedContext) Veto(reason string) {
	c.Vetoed = true
	c.VetoReason = reason
}

// Drop removes the memories for which drop reports true and returns how
// many it removed.
func (c *MemoryExtractedContext) Drop(drop func(ExtractedMemory) bool) int {
	n := len(c.Memories)
	c.Memories = slices.DeleteFunc(c.Memories, drop)
	return n - len(c.Memories)
}

func (c *MemoryExtractedContext) route() route { return c.Where.route() }
func (c *MemoryExtractedContext) isolate()     { c.Memories = cloneNonEmpty(c.Memories) }
func (c *MemoryExtractedContext) merge(from *MemoryExtractedContext) {
	mergeFields(c.mutableFields(), c, from)
}
func (c *MemoryExtractedContext) stopped() bool { return c.Vetoed }

// check fails a hook that left a memory without text, or one whose owner
// (scope, person, agent, room) none of the memories it got had.
func (c *MemoryExtractedContext) check(before *MemoryExtractedContext) error {
	var errs []error
	for i, m := range c.Memories {
		if strings.TrimSpace(m.Text) == "" {
			errs = append(errs, fmt.Errorf("memory %d has no text", i))
			continue
		}
		if !slices.ContainsFunc(before.Memories, func(b ExtractedMemory) bool { return sameOwner(b, m) }) {
			errs = append(errs, fmt.Errorf("memory %d (scope %q, person %q, agent %q, room %q) is not owned like any candidate", i, m.Scope, m.Person, m.Agent, m.Room))
		}
	}
	return errors.Join(errs...)
}

func sameOwner(a, b ExtractedMemory) bool {
	return a.Scope == b.Scope && a.Person == b.Person && a.Agent == b.Agent && a.Room == b.Room
}

func (c *MemoryExtractedContext) describe(b *MemoryExtractedContext, detail bool) (Effect, string) {
	mems := !slices.Equal(c.Memories, b.Memories)
	vetoed := c.Vetoed && !b.Vetoed
	var eff Effect
	switch {
	case vetoed:
		eff = EffectDeclined
	default:
		eff = effect(mems || c.Vetoed != b.Vetoed || c.VetoReason != b.VetoReason, false)
	}
	if !detail || eff == EffectUnchanged {
		return eff, ""
	}
	var ch changes
	if vetoed {
		ch.value("vetoed", c.VetoReason)
	}
	if mems {
		if len(c.Memories) == len(b.Memories) {
			ch.add("memories: " + strconv.Itoa(len(c.Memories)) + " edited")
		} else {
			ch.add("memories: " + strconv.Itoa(len(b.Memories)) + " → " + strconv.Itoa(len(c.Memories)))
		}
	}
	return eff, ch.String()
}

// EmitFrom emits the built-in event ev with c to the hooks of the registry
// the hook whose context is from runs in: a built-in plugin's hook emitting
// a typed event (the memory plugin's extract hook emits memory:extracted).
// It counts towards the recursion limit of from's causal chain, like
// Base.Emit, and c gets from's correlation id when it has none. It returns
// what Emit returns, and ErrNoService when from is not running in a hook
// of this process's registry (a context built by a caller, or a process
// plugin's hook: those emit custom events only, with Base.Emit).
func EmitFrom[T any, P ContextOf[T]](ctx context.Context, from Context, ev Event[T], c P) error {
	b := from.hookBase()
	if b.em == nil || b.em.reg.services.Events != nil {
		return fmt.Errorf("failed to emit %s: %w", ev.Name(), ErrNoService)
	}
	if d := b.em.depth + 1; Depth(ctx) < d {
		ctx = WithDepth(ctx, d)
	}
	if cb := c.hookBase(); cb.CorrelationID == "" {
		cb.CorrelationID = b.em.correlationID
	}
	return Emit(ctx, b.em.reg, ev, c)
}
