package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
)

// Content keys hookroom puts on messages it sends on behalf of hooks. They
// are trusted only on events sent by hookroom's own accounts: a person's
// message carrying them is still a person's message.
const (
	keySourceKind     = "com.hookroom.source_kind"
	keyHookSource     = "com.hookroom.hook_source"
	keyDepth          = "com.hookroom.depth"
	keyOriginalSender = "com.hookroom.original_sender"
)

// hostServices implements the hook host services over the bot's accounts.
type hostServices struct {
	b *Bot

	mu     sync.Mutex
	recent map[id.EventID]*agentMessage // messages of managed accounts, by event id
	latest map[scopeKey]*agentMessage   // latest per room/thread and sender
	order  []id.EventID

	attachments attachmentIndex // files of people's recent messages
}

type scopeKey struct {
	room   id.RoomID
	thread id.EventID
	sender id.UserID
}

type agentMessage struct {
	agent  hooks.AgentName
	thread id.EventID
	msg    hooks.AgentMessage
}

const rememberedMessages = 4096

var (
	_ hooks.MessageSender = (*hostServices)(nil)
	_ hooks.RoomState     = (*hostServices)(nil)
	_ hooks.MatrixAdmin   = (*hostServices)(nil)
	_ hooks.AgentMessages = (*hostServices)(nil)
	_ hooks.Attachments   = (*hostServices)(nil)
)

func (s *hostServices) bind() hooks.Services {
	return hooks.Services{Sender: s, State: s, Admin: s, Messages: s, Attachments: s}
}

// account returns the account that speaks for agent (the router for "").
func (s *hostServices) account(agent hooks.AgentName) *matrixio.Account {
	if a, ok := s.b.w().agents[agent]; ok {
		return a
	}
	return s.b.router
}

// SendHookMessage sends a message a hook asked for, marked with its origin.
func (s *hostServices) SendHookMessage(ctx context.Context, msg hooks.HookMessage) (id.EventID, error) {
	acct := s.account(msg.Agent)
	extra := make(map[string]any, len(msg.Extra)+4)
	for k, v := range msg.Extra {
		extra[k] = v
	}
	kind := hooks.SourceHook
	if msg.TriggerDispatch {
		kind = hooks.SourceHookDispatch
	}
	extra[keySourceKind] = string(kind)
	extra[keyHookSource] = msg.Plugin + ":" + msg.Event
	extra[keyDepth] = msg.Depth
	if msg.OriginalSender != "" {
		extra[keyOriginalSender] = string(msg.OriginalSender)
	}
	opts := matrixio.SendOptions{ThreadRoot: msg.ThreadID, Extra: extra}
	if msg.ThreadID != "" {
		if latest, err := acct.LatestThreadEvent(ctx, msg.RoomID, msg.ThreadID); err == nil {
			opts.ThreadFallback = latest
		}
	}
	evID, err := acct.SendText(ctx, msg.RoomID, msg.Text, opts)
	if err != nil {
		return "", fmt.Errorf("failed to send hook message: %w", err)
	}
	return evID, nil
}

// RoomStateEvent reads one state event with the router's account.
func (s *hostServices) RoomStateEvent(ctx context.Context, room id.RoomID, eventType, stateKey string) (json.RawMessage, error) {
	var raw json.RawMessage
	err := s.b.router.GetState(ctx, room, event.NewEventType(eventType), stateKey, &raw)
	if errors.Is(err, mautrix.MNotFound) {
		return nil, fmt.Errorf("failed to read %s state in %s: %w", eventType, room, hooks.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read %s state in %s: %w", eventType, room, err)
	}
	return raw, nil
}

// RoomStateEvents reads every state event of a type.
func (s *hostServices) RoomStateEvents(ctx context.Context, room id.RoomID, eventType string) (map[string]json.RawMessage, error) {
	evs, err := s.b.router.GetStateEvents(ctx, room, event.NewEventType(eventType))
	if err != nil {
		return nil, fmt.Errorf("failed to read %s state in %s: %w", eventType, room, err)
	}
	out := make(map[string]json.RawMessage, len(evs))
	for key, ev := range evs {
		out[key] = ev.Content.VeryRaw
	}
	return out, nil
}

// PutRoomState writes one state event with the router's account.
func (s *hostServices) PutRoomState(ctx context.Context, room id.RoomID, eventType, stateKey string, content any) (id.EventID, error) {
	evID, err := s.b.router.PutState(ctx, room, event.NewEventType(eventType), stateKey, content)
	if err != nil {
		return "", fmt.Errorf("failed to write %s state in %s: %w", eventType, room, err)
	}
	return evID, nil
}

// ResolveAlias resolves a room alias.
func (s *hostServices) ResolveAlias(ctx context.Context, alias id.RoomAlias) (id.RoomID, error) {
	return s.b.router.ResolveAlias(ctx, alias)
}

// CreateRoom creates a room with the router's account.
func (s *hostServices) CreateRoom(ctx context.Context, req hooks.CreateRoomRequest) (id.RoomID, error) {
	power := make(map[id.UserID]int, len(req.PowerUsers))
	for _, u := range req.PowerUsers {
		power[u] = 100
	}
	return s.b.router.CreateRoom(ctx, matrixio.CreateRoomOptions{
		Name: req.Name, AliasLocalpart: req.AliasLocalpart, Topic: req.Topic,
		Invite: req.Invite, PowerUsers: power,
	})
}

// InviteUser invites user into room with the router's account.
func (s *hostServices) InviteUser(ctx context.Context, room id.RoomID, user id.UserID) error {
	return s.b.router.Invite(ctx, room, user)
}

// RoomMembers lists the joined members of room.
func (s *hostServices) RoomMembers(ctx context.Context, room id.RoomID) ([]id.UserID, error) {
	members, err := s.b.router.JoinedMembers(ctx, room)
	if err != nil {
		return nil, err
	}
	out := make([]id.UserID, 0, len(members))
	for u := range members {
		out = append(out, u)
	}
	return out, nil
}

// AddRoomToSpace adds room to space.
func (s *hostServices) AddRoomToSpace(ctx context.Context, space, room id.RoomID) error {
	return s.b.router.AddToSpace(ctx, space, room)
}

// remember records a message one of hookroom's accounts posted, for
// LatestAgentMessage and to know which agent a reaction targets.
func (s *hostServices) remember(ev *event.Event, e entity) {
	if ev.Type != event.EventMessage {
		return
	}
	msg := ev.Content.AsMessage()
	if msg == nil {
		return
	}
	m := &agentMessage{agent: e.name, thread: threadRoot(msg), msg: hooks.AgentMessage{
		EventID: ev.ID, Sender: ev.Sender, Body: msg.Body, Content: ev.Content.VeryRaw,
		Timestamp: time.UnixMilli(ev.Timestamp),
	}}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recent == nil {
		s.recent = map[id.EventID]*agentMessage{}
		s.latest = map[scopeKey]*agentMessage{}
	}
	s.recent[ev.ID] = m
	s.order = append(s.order, ev.ID)
	if len(s.order) > rememberedMessages {
		delete(s.recent, s.order[0])
		s.order = s.order[1:]
	}
	key := scopeKey{room: ev.RoomID, thread: m.thread, sender: ev.Sender}
	if old := s.latest[key]; old == nil || old.msg.Timestamp.Before(m.msg.Timestamp) || old.msg.Timestamp.Equal(m.msg.Timestamp) {
		s.latest[key] = m
	}
}

func (s *hostServices) lookup(evID id.EventID) *agentMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.recent[evID]
}

// LatestAgentMessage returns the latest message sender posted in room (or
// in thread) since this run started.
func (s *hostServices) LatestAgentMessage(_ context.Context, room id.RoomID, sender id.UserID, thread id.EventID) (*hooks.AgentMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.latest[scopeKey{room: room, thread: thread, sender: sender}]; m != nil {
		cp := m.msg
		return &cp, nil
	}
	return nil, nil
}
