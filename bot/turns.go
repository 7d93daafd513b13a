package bot

import (
	"context"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
)

// turnQueues runs turns one at a time per conversation scope (a thread),
// different scopes in parallel. Stop waits for every turn to end.
type turnQueues struct {
	mu     sync.Mutex
	queues map[agents.ScopeKey][]func(context.Context)
	wg     sync.WaitGroup
}

func (q *turnQueues) run(ctx context.Context, scope agents.ScopeKey, fn func(context.Context)) {
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

func (q *turnQueues) drain(ctx context.Context, scope agents.ScopeKey) {
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

func (q *turnQueues) wait() { q.wg.Wait() }

// turnIndex finds the turn of a message, queued behind other turns of its
// thread or running, by the message's event id or (running) its reply's,
// so that a 🛑 reaction on either or a redaction of the message stops it.
type turnIndex struct {
	mu      sync.Mutex
	turns   map[id.EventID]*indexedTurn
	aliases map[id.EventID]id.EventID // reply → source
}

type indexedTurn struct {
	scope  agents.ScopeKey
	cancel context.CancelCauseFunc // nil while queued
	cause  error                   // why it was stopped while queued
}

// queue registers the turn of source, waiting in scope's queue. startTurn
// calls it before queueing the turn.
func (x *turnIndex) queue(source id.EventID, scope agents.ScopeKey) {
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
func (x *turnIndex) start(source id.EventID, cancel context.CancelCauseFunc) {
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

// alias makes reply stand for source's turn.
func (x *turnIndex) alias(reply, source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.aliases != nil {
		x.aliases[reply] = source
	}
}

// remove forgets source's turn; it is called when the turn ended.
func (x *turnIndex) remove(source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.turns, source)
	for r, s := range x.aliases {
		if s == source {
			delete(x.aliases, r)
		}
	}
}

// stop stops the turn of target with cause: cancels it if it runs, or
// makes it end as soon as it starts if it is queued. With viaReply, target
// may also be the turn's reply. It reports the scope (thread) of the turn
// and whether there was one.
func (x *turnIndex) stop(target id.EventID, cause error, viaReply bool) (scope agents.ScopeKey, ok bool) {
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

// model is the turn's agent's model in the world the turn started in.
func (t *turn) model() agents.Model {
	return t.b.countModel(t.agent, t.w.providerModel(t.agent), t.w.models[t.w.cfg.Agents[string(t.agent)].Model])
}

// roomInfo answers the room_info tool for the room of the call.
func (b *Bot) roomInfo(ctx context.Context) (agents.RoomInfo, error) {
	call, _ := agents.ToolCallFrom(ctx)
	info := agents.RoomInfo{RoomID: call.RoomID, ThreadID: call.ThreadID}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var name struct {
		Name string `json:"name"`
	}
	if err := b.router.GetState(ctx, call.RoomID, event.StateRoomName, "", &name); err == nil {
		info.Name = name.Name
	}
	var topic struct {
		Topic string `json:"topic"`
	}
	if err := b.router.GetState(ctx, call.RoomID, event.StateTopic, "", &topic); err == nil {
		info.Topic = topic.Topic
	}
	members, err := b.router.JoinedMembers(ctx, call.RoomID)
	if err != nil {
		return info, err
	}
	info.MemberCount = len(members)
	return info, nil
}
