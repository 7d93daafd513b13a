package bot

import (
	"context"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// turnQueues runs turns one at a time per conversation scope (a thread),
// different scopes in parallel. Stop waits for every turn to end.
type turnQueues struct {
	mu     sync.Mutex
	queues map[string][]func(context.Context)
	wg     sync.WaitGroup
}

func (q *turnQueues) run(ctx context.Context, scope string, fn func(context.Context)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.queues == nil {
		q.queues = map[string][]func(context.Context){}
	}
	pending, busy := q.queues[scope]
	q.queues[scope] = append(pending, fn)
	if busy {
		return
	}
	q.wg.Add(1)
	go q.drain(ctx, scope)
}

func (q *turnQueues) drain(ctx context.Context, scope string) {
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

// turnIndex finds the turn in progress for a message or its reply, so a
// 🛑 reaction on either stops it.
type turnIndex struct {
	mu      sync.Mutex
	cancel  map[id.EventID]context.CancelCauseFunc
	aliases map[id.EventID]id.EventID // reply → source
}

func (x *turnIndex) add(source id.EventID, cancel context.CancelCauseFunc) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.cancel == nil {
		x.cancel = map[id.EventID]context.CancelCauseFunc{}
		x.aliases = map[id.EventID]id.EventID{}
	}
	x.cancel[source] = cancel
}

// alias makes reply stand for source's turn.
func (x *turnIndex) alias(reply, source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.aliases != nil {
		x.aliases[reply] = source
	}
}

func (x *turnIndex) remove(source id.EventID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.cancel, source)
	for r, s := range x.aliases {
		if s == source {
			delete(x.aliases, r)
		}
	}
}

// stop cancels the turn of target (a message or a reply); it reports
// whether there was one.
func (x *turnIndex) stop(target id.EventID) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if s, ok := x.aliases[target]; ok {
		target = s
	}
	cancel, ok := x.cancel[target]
	if ok {
		cancel(errStopped)
	}
	return ok
}

// modelName is the model an agent runs on.
func (b *Bot) modelName(agent hooks.AgentName) string {
	return b.w().cfg.Agents[string(agent)].Model
}

func (b *Bot) modelFor(agent hooks.AgentName) agents.Model {
	return b.w().models[b.modelName(agent)]
}

// toolsFor builds the tools an agent may call.
func (b *Bot) toolsFor(agent hooks.AgentName) *agents.Toolset {
	var tools []agents.Tool
	for _, name := range b.w().cfg.Agents[string(agent)].Tools {
		switch name {
		case agents.ToolCurrentTime:
			tools = append(tools, agents.CurrentTime{})
		case agents.ToolRoomInfo:
			tools = append(tools, agents.RoomInfoTool(b.roomInfo))
		default:
			if set := b.w().plugins; set != nil {
				if t, ok := set.Tool(name); ok {
					tools = append(tools, pluginTool{b: b, set: set, tool: t})
				}
			}
		}
	}
	if len(tools) == 0 {
		return nil
	}
	ts, err := agents.NewToolset(tools...)
	if err != nil {
		return nil
	}
	return ts
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
