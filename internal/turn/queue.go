package turn

import (
	"context"
	"sync"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
)

// Queues runs turns one at a time per conversation scope (a thread),
// different scopes in parallel; Wait waits for every turn to end. The
// zero value is ready to use.
type Queues struct {
	mu     sync.Mutex
	queues map[agents.ScopeKey][]func(context.Context)
	wg     sync.WaitGroup
}

// Run queues fn in scope: it runs once the scope's earlier functions
// returned, unless ctx ended by then.
func (q *Queues) Run(ctx context.Context, scope agents.ScopeKey, fn func(context.Context)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queues == nil {
		q.queues = map[agents.ScopeKey][]func(context.Context){}
	}
	pending, busy := q.queues[scope]
	q.queues[scope] = append(pending, fn)
	if busy {
		return
	}
	q.wg.Add(1)
	go q.drain(ctx, scope)
}

func (q *Queues) drain(ctx context.Context, scope agents.ScopeKey) {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		pending := q.queues[scope]
		if len(pending) == 0 || ctx.Err() != nil {
			delete(q.queues, scope)
			q.mu.Unlock()
			return
		}
		fn := pending[0]
		q.queues[scope] = pending[1:]
		q.mu.Unlock()
		fn(ctx)
	}
}

// Wait waits until every queued function ran or was dropped.
func (q *Queues) Wait() { q.wg.Wait() }

// Index finds the turn of a message, queued behind other turns of its
// thread or running, by the message's event id or (running) its reply's,
// so that a 🛑 reaction on either or a redaction of the message stops it.
type Index struct {
	mu      sync.Mutex
	turns   map[id.EventID]*indexedTurn
	aliases map[id.EventID]id.EventID // reply → source
}

type indexedTurn struct {
	scope  agents.ScopeKey
	cancel context.CancelCauseFunc // nil while queued
	cause  error                   // why it was stopped while queued
}

// Queue registers the turn of source, waiting in scope's queue; the bot
// calls it before it queues the turn.
func (x *Index) Queue(source id.EventID, scope agents.ScopeKey) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.turns == nil {
		x.turns = map[id.EventID]*indexedTurn{}
		x.aliases = map[id.EventID]id.EventID{}
	}
	x.turns[source] = &indexedTurn{scope: scope}
}

// start records that source's turn runs and is stopped with cancel. A turn
// stopped while it was queued is cancelled at once, with that cause.
func (x *Index) start(source id.EventID, cancel context.CancelCauseFunc) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.turns == nil {
		x.turns = map[id.EventID]*indexedTurn{}
		x.aliases = map[id.EventID]id.EventID{}
	}
	it, ok := x.turns[source]
	if !ok {
		it = &indexedTurn{}
		x.turns[source] = it
	}
	it.cancel = cancel
	if it.cause != nil {
		cancel(it.cause)
	}
}

// Alias makes reply stand for source's turn.
func (x *Index) Alias(reply, source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.aliases != nil {
		x.aliases[reply] = source
	}
}

// remove forgets source's turn; it is called when the turn ended.
func (x *Index) remove(source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.turns, source)
	for r, s := range x.aliases {
		if s == source {
			delete(x.aliases, r)
		}
	}
}

// Stop stops the turn of target with cause: cancels it if it runs, or
// makes it end as soon as it starts if it is queued. With viaReply, target
// may also be the turn's reply. It reports the scope (thread) of the turn
// and whether there was one.
func (x *Index) Stop(target id.EventID, cause error, viaReply bool) (scope agents.ScopeKey, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, isReply := x.aliases[target]; isReply && viaReply {
		target = s
	}
	it, ok := x.turns[target]
	if !ok {
		return "", false
	}
	if it.cancel != nil {
		it.cancel(cause)
	} else if it.cause == nil {
		it.cause = cause
	}
	return it.scope, true
}

// StoppedWhileQueued reports whether source's turn waits in its thread's
// queue with a stop already asked for.
func (x *Index) StoppedWhileQueued(source id.EventID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	it, ok := x.turns[source]
	return ok && it.cancel == nil && it.cause != nil
}
