package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
)

var botReady = hooks.BotReady

// handleEvent is the pipeline's entry point, called once per inbound
// Matrix event (whichever accounts saw it), in room order. It reports
// whether the event's handling goes on in the background (a turn), which
// then marks it handled itself. replayed is true for an event left
// unhandled by the last run.
//
// It loads the world in service once: everything the event leads to
// (authorization, routing, the turn, a command, an approval answer) sees
// the same configuration, even when a reload replaces it meanwhile.
func (b *Bot) handleEvent(ctx context.Context, ev *event.Event, replayed bool) (async bool) {
	return b.handle(ctx, b.w(), ev, replayed)
}

// handle is handleEvent in world w (also for the event an encrypted one
// decrypts to).
func (b *Bot) handle(ctx context.Context, w *world, ev *event.Event, replayed bool) (async bool) {
	if ev.StateKey != nil && ev.Type == event.StateMember {
		b.handleMember(ctx, w, ev)
		return false
	}
	if ev.Type == event.EventEncrypted {
		return b.handleEncrypted(ctx, w, ev, replayed)
	}
	if e, managed := w.accounts[ev.Sender]; managed {
		b.services.remember(ev, e)
		if ev.Type == event.EventMessage {
			if o, ok := hookOriginOf(ev); ok && (o.kind == hooks.SourceHookDispatch || o.kind == hooks.SourceScheduled) {
				return b.handleHookMessage(ctx, w, ev, o, replayed)
			}
		}
		return false
	}
	if w.isManaged(ev.Sender) {
		return false // another bot
	}
	switch ev.Type {
	case event.EventMessage:
		return b.handleMessage(ctx, w, ev, replayed)
	case event.EventReaction:
		b.handleReaction(ctx, w, ev)
	case event.EventRedaction:
		return b.handleRedaction(ctx, ev)
	}
	return false
}

// authorized reports whether user may talk to agents in room: global
// users everywhere; the people room_permissions lists for room, or
// everyone when it has no entry and default_room_access is on; and, in a
// room hookroom's accounts joined on an invite, the inviter for as long as
// authorization still lets them invite.
func (b *Bot) authorized(w *world, user id.UserID, room id.RoomID) bool {
	if w.isManaged(user) {
		return false
	}
	person, _ := w.policy.Canonical(user)
	if w.isGlobal(user) || b.roomRules(w, user, room) || (person != user && b.roomRules(w, person, room)) {
		return true
	}
	// In a direct message with an agent, its DM policy decides once the
	// message is routed (admit): open and pairing admit people the room
	// rules do not know.
	return b.directRoom(w, room)
}

// roomRules reports whether config.yaml's room rules admit user in room:
// room_permissions, default_room_access, or having invited hookroom into
// the room while invite_users (or global_users) allows it.
func (b *Bot) roomRules(w *world, user id.UserID, room id.RoomID) bool {
	auth := w.cfg.Authorization
	listed := false
	for ref, users := range auth.RoomPermissions {
		if w.roomRefID(ref) != room {
			continue
		}
		listed = true
		if slices.Contains(users, user) {
			return true
		}
	}
	if !listed && auth.DefaultRoomAccess {
		return true
	}
	return w.mayInvite(user) && b.invited.invitedBy(room, user)
}

// mayInvite reports whether user may invite hookroom's accounts into rooms
// of their own: a global user (a pattern, after aliases) or one named by
// invite_users.
func (w *world) mayInvite(user id.UserID) bool {
	person, _ := w.policy.Canonical(user)
	return w.isGlobal(user) || w.cfg.Authorization.MayInvite(user) || w.cfg.Authorization.MayInvite(person)
}

// isGlobal reports whether user is one of hookroom's administrators
// (authorization.global_users, after aliases).
func (w *world) isGlobal(user id.UserID) bool {
	if w.policy == nil { // a world built by hand (tests)
		return slices.Contains(w.cfg.Authorization.GlobalUsers, user)
	}
	person, _ := w.policy.Canonical(user)
	return w.policy.IsGlobal(person)
}

// directRoom reports whether room is a direct message with one of w's
// agents (joined on that person's invite with is_direct).
func (b *Bot) directRoom(w *world, room id.RoomID) bool {
	for _, acct := range w.agents {
		if b.invited.directWith(room, acct.UserID()) {
			return true
		}
	}
	return false
}

// roomKey is the key of config.yaml's rooms that room is, or "" when it
// is not a configured room (a DM, a room an agent was invited to).
func (w *world) roomKey(room id.RoomID) string {
	for key, rid := range w.rooms {
		if rid == room {
			return key
		}
	}
	return ""
}

// threadMode is where the agents reply in room: the room's thread_mode,
// else defaults.thread_mode.
func (w *world) threadMode(room id.RoomID) config.ThreadMode {
	if key := w.roomKey(room); key != "" {
		if m := w.cfg.Rooms[key].ThreadMode; m != "" {
			return m
		}
	}
	return w.cfg.Defaults.ThreadMode
}

// roomRefID resolves a room reference of config.yaml (a room key, a room id
// or an alias of a configured room) to the room id it names here.
func (w *world) roomRefID(ref string) id.RoomID {
	if rid, ok := w.rooms[ref]; ok {
		return rid
	}
	if len(ref) > 0 && ref[0] == '!' {
		return id.RoomID(ref)
	}
	for key, r := range w.cfg.Rooms {
		if string(r.FullAlias(w.cfg.Matrix.ServerName)) == ref {
			return w.rooms[key]
		}
	}
	return ""
}

// handleMessage runs a person's message through the pipeline.
func (b *Bot) handleMessage(ctx context.Context, w *world, ev *event.Event, replayed bool) bool {
	log := zerolog.Ctx(ctx)
	if !b.authorized(w, ev.Sender, ev.RoomID) {
		log.Debug().Stringer("sender", ev.Sender).Msg("ignoring message from an unauthorized sender")
		return false
	}
	msg := ev.Content.AsMessage()
	if problem := malformedMessage(ev, msg); problem != "" {
		// Debug only: anyone in the room can send these, as often as they
		// like.
		log.Debug().Str("problem", problem).Msg("ignoring a malformed message")
		return false
	}
	if msg.RelatesTo != nil && msg.RelatesTo.Type == event.RelReplace {
		log.Debug().Msg("ignoring an edit")
		return false
	}
	if b.answerReply(ctx, w, ev, msg) {
		log.Info().Msg("tool call approval answered by a reply")
		return false
	}
	// An audio message goes on as its transcript (voice.go), never as a
	// command; a spoken answer follows the turn.
	ev, msg, voiced, handled := b.transcribeVoice(ctx, w, ev, msg)
	if handled {
		return false
	}
	env := b.envelope(w, ev, msg)
	if voiced {
		env.SourceKind = hooks.SourceVoice
	}
	candidates := b.agentsOf(w, ev.RoomID)
	env.MentionedAgents = w.mentioned(msg, candidates)
	// The agent is known before message:received when the message names
	// it (a mention, the thread's agent, the only agent in the room);
	// otherwise the router decides after the hooks ran.
	if d, ok := b.preRoute(ctx, env, candidates); ok {
		env.AgentName = d.agent
	}
	cmd, isCommand := parseCommand(env.Body)
	isCommand = isCommand && !voiced
	// What happens to the message before its turn begins (message:received,
	// the router) is recorded for the turn's trace (newTraceRecorder).
	ctx = b.withPreTurnTrace(ctx, w)
	reg := w.reg
	if reg.Has(hooks.MessageReceived.Name()) {
		c := &hooks.MessageReceivedContext{Envelope: env}
		turn.Emit(ctx, reg, hooks.MessageReceived, c)
		if c.Suppress {
			log.Info().Msg("message suppressed by a message:received hook")
			return false
		}
	}
	log.Info().Stringer("sender", ev.Sender).Msg("message received")
	if isCommand {
		b.runCommand(ctx, w, ev, env, cmd)
		return false
	}
	decision, ok := b.route(ctx, w, ev, msg, env)
	if !ok {
		log.Debug().Msg("no agent in this room; not answering")
		return false
	}
	log.Info().Str("agent", string(decision.agent)).Str("why", decision.reason).Msg("routed")
	if !b.admit(ctx, w, ev, env, decision.agent) {
		return false
	}
	if decision.reason == "router" || decision.reason == "fallback" {
		b.handoff(ctx, w, ev, env, decision.agent)
	}
	b.startTurn(ctx, w, ev, env, decision.agent, reg, replayed)
	b.queueSpokenReply(ctx, w, ev, env, decision.agent)
	return true
}

// malformedMessage says what makes a message event's content unusable, or
// "" when nothing does. Its msgtype and body must be strings: mautrix parses
// content like {"msgtype": "m.text", "body": 42} field by field, fails on
// the body, keeps the rest and leaves the body empty, so the parsed content
// alone would look like an empty message.
func malformedMessage(ev *event.Event, msg *event.MessageEventContent) string {
	if raw := ev.Content.Raw; raw != nil {
		if _, ok := raw["msgtype"].(string); !ok {
			return "msgtype is not a string"
		}
		if _, ok := raw["body"].(string); !ok {
			return "body is not a string"
		}
	}
	if msg == nil || msg.MsgType == "" {
		return "no msgtype"
	}
	return ""
}

// envelope describes a person's message for hooks. The files of the
// message are remembered for the Attachments host service.
func (b *Bot) envelope(w *world, ev *event.Event, msg *event.MessageEventContent) hooks.Envelope {
	thread := threadRoot(msg)
	resolved := thread
	if resolved == "" && w.threadMode(ev.RoomID) != config.ThreadModeRoom {
		resolved = ev.ID
	}
	kind := hooks.SourceMessage
	switch msg.MsgType {
	case event.MsgImage, event.MsgFile, event.MsgAudio, event.MsgVideo, event.MsgBeeperGallery:
		kind = hooks.SourceMedia
	}
	if msg.RelatesTo != nil && msg.RelatesTo.Type == event.RelReplace {
		kind = hooks.SourceEdit
	}
	body, atts := matrixio.AttachmentsOf(msg)
	b.services.attachments.add(ev.RoomID, ev.ID, atts)
	return hooks.Envelope{
		SourceEventID: ev.ID, RoomID: ev.RoomID, ThreadID: thread, ResolvedThreadID: resolved,
		SessionID: string(agents.NewScopeKey(ev.RoomID, resolved)), RequesterID: ev.Sender, SenderID: ev.Sender,
		Body: body, AttachmentIDs: matrixio.AttachmentIDs(atts), SourceKind: kind,
	}
}

func threadRoot(msg *event.MessageEventContent) id.EventID {
	if msg.RelatesTo != nil && msg.RelatesTo.Type == event.RelThread {
		return msg.RelatesTo.EventID
	}
	return ""
}

// handleReaction fires reaction:received for a person's reaction.
func (b *Bot) handleReaction(ctx context.Context, w *world, ev *event.Event) {
	if !b.authorized(w, ev.Sender, ev.RoomID) {
		return
	}
	rel := ev.Content.AsReaction().GetRelatesTo()
	if rel == nil || rel.Type != event.RelAnnotation {
		return
	}
	if b.answerConfigReaction(ctx, w, ev, rel.EventID, rel.Key) {
		return // a !config proposal's ✅ (bot/configcmd.go)
	}
	if b.answerCardReaction(ctx, w, ev, rel.EventID, rel.Key) {
		zerolog.Ctx(ctx).Info().Msg("tool call approval answered by a reaction")
		return
	}
	if rel.Key == turn.StopKey {
		if _, ok := b.turnsByEvent.Stop(rel.EventID, turn.ErrStopped, true); ok {
			zerolog.Ctx(ctx).Info().Msg("turn stopped by a reaction")
			return
		}
	}
	reg := w.reg
	if !reg.Has(hooks.ReactionReceived.Name()) {
		return
	}
	c := &hooks.ReactionReceivedContext{
		RoomID: ev.RoomID, EventID: ev.ID, SenderID: ev.Sender, Key: rel.Key, TargetEventID: rel.EventID,
	}
	if m := b.services.lookup(rel.EventID); m != nil {
		c.Agent, c.ThreadID = m.agent, m.thread
	}
	turn.Emit(ctx, reg, hooks.ReactionReceived, c)
}

// trackMembers records, for joined rooms hookroom sees for the first time
// (through whichever account: the router in configured rooms, an agent in
// a direct message), who is already a member: those people never trigger
// room:member_joined. handleSync calls it for every account's batch before
// the batch's events are queued.
func (b *Bot) trackMembers(ctx context.Context, batch matrixio.SyncBatch) error {
	for _, room := range batch.Rooms {
		if room.Membership != event.MembershipJoin {
			continue
		}
		seeded, err := b.track.RoomSeeded(ctx, room.RoomID)
		if err != nil {
			return fmt.Errorf("failed to read member markers of %s: %w", room.RoomID, err)
		}
		if seeded {
			continue
		}
		var present []id.UserID
		for _, evs := range [][]*event.Event{room.State, room.Timeline} {
			for _, ev := range evs {
				if ev.Type != event.StateMember || ev.StateKey == nil {
					continue
				}
				if m := ev.Content.AsMember(); m != nil && m.Membership == event.MembershipJoin {
					present = append(present, id.UserID(*ev.StateKey))
				}
			}
		}
		if err := b.track.SeedMembers(ctx, room.RoomID, present); err != nil {
			return fmt.Errorf("failed to record members of %s: %w", room.RoomID, err)
		}
	}
	return nil
}

// handleMember fires room:member_joined the first time a person joins a
// room (ever) and room:member_left when a person leaves on their own.
func (b *Bot) handleMember(ctx context.Context, w *world, ev *event.Event) {
	user := id.UserID(*ev.StateKey)
	if w.isManaged(user) {
		return
	}
	m := ev.Content.AsMember()
	if m == nil {
		return
	}
	prev := prevMembership(ev)
	reg := w.reg
	c := &hooks.RoomMemberContext{
		RoomID: ev.RoomID, EventID: ev.ID, UserID: user, SenderID: ev.Sender,
		DisplayName: m.Displayname, AvatarURL: string(m.AvatarURL),
		Membership: string(m.Membership), PrevMembership: string(prev.Membership),
	}
	switch {
	case m.Membership == event.MembershipJoin && prev.Membership != event.MembershipJoin:
		first, err := b.track.MarkJoined(ctx, ev.RoomID, user)
		if err != nil {
			zerolog.Ctx(ctx).Error().Err(err).Msg("failed to record a member join")
			return
		}
		if !first {
			return
		}
		zerolog.Ctx(ctx).Info().Stringer("user", user).Msg("new member joined")
		turn.Emit(ctx, reg, hooks.RoomMemberJoined, c)
	case m.Membership == event.MembershipLeave && prev.Membership == event.MembershipJoin && ev.Sender == user:
		c.DisplayName, c.AvatarURL = prev.Displayname, string(prev.AvatarURL)
		turn.Emit(ctx, reg, hooks.RoomMemberLeft, c)
	}
	if (m.Membership == event.MembershipLeave || m.Membership == event.MembershipBan) && prev.Membership == event.MembershipJoin {
		b.leaveIfAlone(ctx, ev.RoomID)
	}
}

func prevMembership(ev *event.Event) *event.MemberEventContent {
	if ev.Unsigned.PrevContent != nil {
		_ = ev.Unsigned.PrevContent.ParseRaw(event.StateMember)
		if m := ev.Unsigned.PrevContent.AsMember(); m != nil {
			return m
		}
	}
	return &event.MemberEventContent{}
}

// hookOrigin is the origin hookroom marks on messages hooks send. It is
// read only from events of hookroom's own accounts: on anyone else's
// message the same keys mean nothing.
type hookOrigin struct {
	kind           hooks.SourceKind
	source         string // plugin:event
	depth          int
	originalSender id.UserID
}

func hookOriginOf(ev *event.Event) (hookOrigin, bool) {
	raw := ev.Content.Raw
	kind, _ := raw[keySourceKind].(string)
	if kind != string(hooks.SourceHook) && kind != string(hooks.SourceHookDispatch) && kind != string(hooks.SourceScheduled) {
		return hookOrigin{}, false
	}
	o := hookOrigin{kind: hooks.SourceKind(kind)}
	o.source, _ = raw[keyHookSource].(string)
	if o.kind == hooks.SourceScheduled {
		// A schedule's message stands for its creator's own message: it
		// starts a causal chain rather than continuing one.
		o.depth = 0
	} else if d, ok := raw[keyDepth].(float64); ok && d >= 1 {
		o.depth = int(d)
	} else {
		o.depth = 1
	}
	if s, ok := raw[keyOriginalSender].(string); ok {
		o.originalSender = id.UserID(s)
	}
	return o, true
}

// hookRequester returns whom a dispatched hook message acts for, when
// handleHookMessage starts on it: the original sender it names, who must
// be allowed to talk to agents in the room (ok is false otherwise), or,
// when it names none (the server's own action, such as a
// room:member_joined hook welcoming someone not yet authorized), the
// account that posted it, without an authorization check.
func (b *Bot) hookRequester(w *world, ev *event.Event, o hookOrigin) (requester id.UserID, ok bool) {
	if o.originalSender == "" {
		return ev.Sender, true
	}
	return o.originalSender, b.authorized(w, o.originalSender, ev.RoomID)
}

// handleHookMessage runs a message a hook sent with TriggerDispatch
// through the pipeline as if the person it acts for had sent it. The first
// synthetic hop (depth 1) runs message:received, without the plugin whose
// message:received hook sent it, and may reach an agent; deeper hops are
// recorded but not dispatched, which stops feedback loops between hooks.
// A schedule's message (source kind scheduled, depth 0) takes the same
// path on behalf of the schedule's creator, who must still be authorized.
func (b *Bot) handleHookMessage(ctx context.Context, w *world, ev *event.Event, o hookOrigin, replayed bool) bool {
	log := zerolog.Ctx(ctx).With().Str("hook_source", o.source).Int("depth", o.depth).Logger()
	ctx = log.WithContext(hooks.WithDepth(ctx, o.depth))
	if o.depth >= 2 {
		log.Debug().Msg("not dispatching a hook message more than one hop deep")
		return false
	}
	requester, ok := b.hookRequester(w, ev, o)
	if !ok {
		log.Info().Stringer("requester", requester).Msg("not dispatching a hook message for an unauthorized person")
		return false
	}
	msg := ev.Content.AsMessage()
	if msg == nil {
		return false
	}
	env := b.envelope(w, ev, msg)
	env.RequesterID = requester
	env.SourceKind, env.HookSource, env.Depth = o.kind, o.source, o.depth
	reg := w.reg
	if reg.Has(hooks.MessageReceived.Name()) {
		c := &hooks.MessageReceivedContext{Envelope: env}
		// The plugin whose message:received hook sent the message does
		// not see it again.
		if plugin, event, ok := strings.Cut(o.source, ":"); ok && event == hooks.MessageReceived.Name() {
			c.SkipPlugins = []string{plugin}
		}
		turn.Emit(ctx, reg, hooks.MessageReceived, c)
		if c.Suppress {
			return false
		}
	}
	decision, ok := b.route(ctx, w, ev, msg, env)
	if !ok {
		return false
	}
	log.Info().Str("agent", string(decision.agent)).Str("why", decision.reason).Msg("dispatching a hook message")
	b.startTurn(ctx, w, ev, env, decision.agent, reg, replayed)
	return true
}
