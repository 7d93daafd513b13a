package bot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/policy"
	"github.com/hookroom/hookroom/tracking"
)

// inviteTimeout bounds accepting or declining one invite.
const inviteTimeout = time.Minute

// invitedRooms holds the rooms hookroom's accounts joined on a person's
// invite (direct messages, ad-hoc rooms), keyed by room and account. It is
// loaded from the database at start-up and changed together with it. It
// lives beside the world, not in it: a reload replaces the world and must
// not forget these rooms.
type invitedRooms struct {
	mu    sync.RWMutex
	rooms map[id.RoomID]map[id.UserID]tracking.InvitedRoom
}

// set adds or replaces rows.
func (r *invitedRooms) set(rows ...tracking.InvitedRoom) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rooms == nil {
		r.rooms = map[id.RoomID]map[id.UserID]tracking.InvitedRoom{}
	}
	for _, row := range rows {
		if r.rooms[row.RoomID] == nil {
			r.rooms[row.RoomID] = map[id.UserID]tracking.InvitedRoom{}
		}
		r.rooms[row.RoomID][row.Account] = row
	}
}

// remove drops the row of room and account and reports whether it existed.
func (r *invitedRooms) remove(room id.RoomID, account id.UserID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.rooms[room][account]; !ok {
		return false
	}
	delete(r.rooms[room], account)
	if len(r.rooms[room]) == 0 {
		delete(r.rooms, room)
	}
	return true
}

// has reports whether account joined room on an invite.
func (r *invitedRooms) has(room id.RoomID, account id.UserID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.rooms[room][account]
	return ok
}

// directWith reports whether room is a direct message account joined on a
// person's invite.
func (r *invitedRooms) directWith(room id.RoomID, account id.UserID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	row, ok := r.rooms[room][account]
	return ok && row.IsDirect
}

// invitedBy reports whether user invited one of hookroom's accounts into room.
func (r *invitedRooms) invitedBy(room id.RoomID, user id.UserID) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, row := range r.rooms[room] {
		if row.Inviter == user {
			return true
		}
	}
	return false
}

// roomsOf lists the rooms account joined on an invite, sorted.
func (r *invitedRooms) roomsOf(account id.UserID) []id.RoomID {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []id.RoomID
	for room, accounts := range r.rooms {
		if _, ok := accounts[account]; ok {
			out = append(out, room)
		}
	}
	slices.Sort(out)
	return out
}

// all returns a copy of every row (tests and diagnostics).
func (r *invitedRooms) all() []tracking.InvitedRoom {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []tracking.InvitedRoom
	for _, room := range slices.Sorted(maps.Keys(r.rooms)) {
		for _, acct := range slices.Sorted(maps.Keys(r.rooms[room])) {
			out = append(out, r.rooms[room][acct])
		}
	}
	return out
}

// loadInvitedRooms reads the remembered invited rooms from the database.
// New calls it once, before any sync loop runs.
func (b *Bot) loadInvitedRooms(ctx context.Context) error {
	rows, err := b.track.InvitedRooms(ctx)
	if err != nil {
		return fmt.Errorf("failed to load invited rooms: %w", err)
	}
	b.invited.set(rows...)
	if len(rows) > 0 {
		zerolog.Ctx(ctx).Info().Int("rooms", len(rows)).Msg("remembered rooms joined on invites")
	}
	return nil
}

// handleInvite decides on an invite of e's account. handleSync calls it
// for every invite of a batch, before the batch is acknowledged, so a
// crash repeats the decision instead of losing it; and before the batch
// that shows the join, so the room's first messages find the agent.
//
//   - From one of hookroom's own accounts (room provisioning): accepted.
//   - From a person authorization.MayInvite allows (global_users,
//     invite_users): accepted, and the room is remembered (memory and
//     database) so the agent answers there, also after restarts.
//   - From anyone else, matrix.bot_accounts included: declined (the
//     account leaves the room), so the invite does not sit pending.
//
// It returns an error only when ctx ended, so that the batch is handed
// over again on the next start; a homeserver that refuses is logged.
func (b *Bot) handleInvite(ctx context.Context, e entity, inv matrixio.Invite) error {
	log := zerolog.Ctx(ctx).With().Stringer("room_id", inv.RoomID).Stringer("inviter", inv.Sender).
		Stringer("account", e.account.UserID()).Logger()
	ctx = log.WithContext(ctx)
	w := b.w()
	_, own := w.accounts[inv.Sender]
	switch {
	case own:
		return b.acceptInvite(ctx, e, inv, false)
	case inv.Sender != "" && !w.isManaged(inv.Sender) && b.acceptsInvite(w, e, inv):
		return b.acceptInvite(ctx, e, inv, true)
	default:
		return b.declineInvite(ctx, e, inv)
	}
}

// acceptInvite joins the room and, for a person's invite, remembers it.
func (b *Bot) acceptInvite(ctx context.Context, e entity, inv matrixio.Invite, remember bool) error {
	log := zerolog.Ctx(ctx)
	row := tracking.InvitedRoom{
		RoomID: inv.RoomID, Account: e.account.UserID(), Inviter: inv.Sender,
		IsDirect: isDirect(inv), AcceptedAt: time.Now(),
	}
	// A person's room is remembered before joining: a crash right after the
	// join (whose next sync no longer shows the invite) still finds it.
	if remember {
		if err := b.track.RememberInvitedRoom(context.WithoutCancel(ctx), row); err != nil {
			log.Error().Err(err).Msg("failed to remember a room joined on an invite; it is forgotten at the next restart")
		}
	}
	jctx, cancel := context.WithTimeout(ctx, inviteTimeout)
	err := e.account.AcceptInvite(jctx, inv.RoomID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			// Stopping: the batch is handed over again at the next start.
			return fmt.Errorf("failed to accept the invite to %s: %w", inv.RoomID, ctx.Err())
		}
		log.Warn().Err(err).Msg("failed to accept invite")
		if remember {
			if _, ferr := b.track.ForgetInvitedRoom(context.WithoutCancel(ctx), inv.RoomID, e.account.UserID()); ferr != nil {
				log.Error().Err(ferr).Msg("failed to forget a room whose invite could not be accepted")
			}
		}
		return nil
	}
	if !remember {
		log.Info().Msg("accepted invite")
		return nil
	}
	b.invited.set(row)
	log.Info().Bool("is_direct", row.IsDirect).Msg("accepted invite; answering in this room")
	return nil
}

// declineInvite rejects an invite from someone who may not invite.
func (b *Bot) declineInvite(ctx context.Context, e entity, inv matrixio.Invite) error {
	log := zerolog.Ctx(ctx)
	lctx, cancel := context.WithTimeout(ctx, inviteTimeout)
	err := e.account.Leave(lctx, inv.RoomID)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("failed to decline the invite to %s: %w", inv.RoomID, ctx.Err())
		}
		log.Warn().Err(err).Msg("failed to decline an invite from a user not allowed to invite")
		return nil
	}
	log.Info().Msg("declined an invite from a user not allowed to invite")
	return nil
}

// acceptsInvite reports whether e accepts a person's invite: from a global
// user or someone invite_users names; and, for a direct message with an
// agent, from anyone the agent's DM policy admits or would give a pairing
// code (open, pairing, a reply_to that names them).
func (b *Bot) acceptsInvite(w *world, e entity, inv matrixio.Invite) bool {
	if w.mayInvite(inv.Sender) {
		return true
	}
	if e.router || !isDirect(inv) {
		return false
	}
	d := w.policy.Decide(policy.Request{Sender: inv.Sender, Agent: e.name, Room: inv.RoomID, DM: true, Pairings: b.pairings})
	return d.Allow || d.Reason == policy.ReasonPairingRequired
}

// isDirect reads the is_direct flag of an invite.
func isDirect(inv matrixio.Invite) bool {
	if inv.Event == nil {
		return false
	}
	m := inv.Event.Content.AsMember()
	return m != nil && m.IsDirect
}

// forgetDepartures forgets the invited rooms acct is no longer in: rooms
// its batch shows as left (it left, was kicked or banned), and rooms where
// its own latest membership event in the batch is a leave or ban.
// handleSync calls it before the batch's invites, so a kick followed by a
// new invite in one batch ends with the room remembered.
func (b *Bot) forgetDepartures(ctx context.Context, acct id.UserID, batch matrixio.SyncBatch) {
	for _, room := range batch.Rooms {
		own := ownMembership(room, acct)
		left := room.Membership == event.MembershipLeave
		if own != nil {
			m := own.Content.AsMember()
			left = left || m.Membership == event.MembershipLeave || m.Membership == event.MembershipBan
		}
		if left {
			b.forgetInvitedRoom(ctx, room.RoomID, acct, own)
		}
	}
}

// ownMembership returns acct's latest m.room.member event in room's
// timeline (or state), nil when the batch has none.
func ownMembership(room matrixio.RoomEvents, acct id.UserID) *event.Event {
	for _, evs := range [][]*event.Event{room.Timeline, room.State} {
		for i := len(evs) - 1; i >= 0; i-- {
			ev := evs[i]
			if ev.Type == event.StateMember && ev.GetStateKey() == acct.String() {
				return ev
			}
		}
	}
	return nil
}

// forgetInvitedRoom forgets that acct joined room on an invite, in memory
// and in the database, and logs it once (nothing happens for a room that
// was not remembered: a configured room, a declined invite).
func (b *Bot) forgetInvitedRoom(ctx context.Context, room id.RoomID, acct id.UserID, leave *event.Event) {
	if !b.invited.remove(room, acct) {
		return
	}
	log := zerolog.Ctx(ctx).Info().Stringer("room_id", room).Stringer("account", acct)
	why := "left"
	if leave != nil {
		m := leave.Content.AsMember()
		switch {
		case m.Membership == event.MembershipBan:
			why = "banned"
		case leave.Sender != acct:
			why = "kicked"
		}
		log = log.Stringer("by", leave.Sender)
		if m.Reason != "" {
			log = log.Str("reason", m.Reason)
		}
	}
	log.Str("why", why).Msg("no longer in a room joined on an invite; forgetting it")
	if _, err := b.track.ForgetInvitedRoom(context.WithoutCancel(ctx), room, acct); err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Stringer("room_id", room).Msg("failed to forget an invited room in the database; it is remembered again at the next restart")
	}
}

// leaveIfAlone makes hookroom's accounts leave a room they joined on an
// invite once no person is left in it (the person left a direct message;
// Element's DMs give the agent the person's power level, so nobody could
// kick it), and forgets the room. Configured rooms are never left.
// handleMember calls it when a person leaves or is removed.
func (b *Bot) leaveIfAlone(ctx context.Context, room id.RoomID) {
	w := b.w()
	var accts []*matrixio.Account
	for _, e := range b.entities(w) {
		if b.invited.has(room, e.account.UserID()) {
			accts = append(accts, e.account)
		}
	}
	if len(accts) == 0 {
		return
	}
	members, err := accts[0].JoinedMembers(ctx, room)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Stringer("room_id", room).Msg("failed to read who is left in an invited room")
		return
	}
	for u := range members {
		if !w.isManaged(u) {
			return
		}
	}
	zerolog.Ctx(ctx).Info().Stringer("room_id", room).Msg("nobody but hookroom is left in a room joined on an invite; leaving it")
	for _, a := range accts {
		if err := a.Leave(ctx, room); err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Stringer("room_id", room).Stringer("account", a.UserID()).Msg("failed to leave an empty invited room")
			continue
		}
		b.forgetInvitedRoom(ctx, room, a.UserID(), nil)
	}
}

// routerIn reports whether the router is a member of room: every
// configured room, and rooms it joined on an invite.
func (b *Bot) routerIn(w *world, room id.RoomID) bool {
	for _, rooms := range w.joined {
		if slices.Contains(rooms, room) {
			return true
		}
	}
	return b.invited.has(room, b.router.UserID())
}

// speakerIn returns the account that answers commands in room: the router
// where it is a member, otherwise the room's first agent (a direct message
// with an agent has no router).
func (b *Bot) speakerIn(w *world, room id.RoomID) *matrixio.Account {
	if b.routerIn(w, room) {
		return b.router
	}
	if names := b.agentsOf(w, room); len(names) > 0 {
		return w.agents[names[0]]
	}
	return b.router
}

// joinedRooms lists the rooms e is in: its configured rooms, then those it
// joined on invites.
func (b *Bot) joinedRooms(w *world, e entity) []id.RoomID {
	rooms := slices.Clone(w.joined[e.name])
	for _, r := range b.invited.roomsOf(e.account.UserID()) {
		if !slices.Contains(rooms, r) {
			rooms = append(rooms, r)
		}
	}
	return rooms
}
