package bot

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/tracking"
)

// provisionWorkers bounds the homeserver requests provisioning makes at
// once: rooms are provisioned (and accounts' joined rooms listed) this many
// at a time.
const provisionWorkers = 8

// roomPlan is one room provisioning has to make sure of: a room of the
// rooms section, or a room an agent names directly by id or alias.
type roomPlan struct {
	key     string // tracking key: "room:<key>" or "ref:<id or alias>"
	cfgKey  string // the rooms section's key; "" for a directly named room
	spec    matrixio.RoomSpec
	members []*matrixio.Account // agent accounts to join (the router joins too)
	invite  []id.UserID         // people to invite
	hash    string

	roomID id.RoomID // the result
	fresh  bool      // provisioned now rather than remembered
}

// roomPlans lists the rooms of w's configuration, rooms section first (by
// key), then rooms agents name directly (by reference).
func (b *Bot) roomPlans(w *world) []*roomPlan {
	members := map[string][]*matrixio.Account{} // room reference → agent accounts
	for _, name := range w.cfg.AgentNames() {
		for _, ref := range w.cfg.Agents[name].Rooms {
			members[ref] = append(members[ref], w.agents[hooks.AgentName(name)])
		}
	}
	var plans []*roomPlan
	for _, key := range w.cfg.RoomKeys() {
		r := w.cfg.Rooms[key]
		p := &roomPlan{
			key: "room:" + key, cfgKey: key, invite: r.Invite,
			spec: matrixio.RoomSpec{
				Alias: r.FullAlias(w.cfg.Matrix.ServerName), ID: r.ID, Name: r.Name, Topic: r.Topic, Encrypted: r.Encrypted(),
			},
		}
		p.members = append(p.members, members[key]...)
		p.members = append(p.members, members[string(p.spec.Alias)]...)
		if p.spec.ID != "" {
			p.members = append(p.members, members[string(p.spec.ID)]...)
		}
		plans = append(plans, p)
	}
	var refs []string
	for ref := range members {
		if _, ok := w.cfg.Rooms[ref]; ok || isConfiguredRef(w.cfg, ref) {
			continue
		}
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		plans = append(plans, &roomPlan{key: "ref:" + ref, spec: refSpec(ref), members: members[ref]})
	}
	for _, p := range plans {
		p.hash = b.planHash(w, p)
	}
	return plans
}

// planHash digests what provisioning p acts on: the homeserver and router,
// the room's alias or id, the member accounts and the people to invite.
// Name, topic and encryption only matter when a room is created and are
// left out: changing them does not make hookroom touch an existing room.
func (b *Bot) planHash(w *world, p *roomPlan) string {
	var members, invite []string
	for _, a := range p.members {
		members = append(members, string(a.UserID()))
	}
	for _, u := range p.invite {
		invite = append(invite, string(u))
	}
	slices.Sort(members)
	slices.Sort(invite)
	h := sha256.New()
	for _, part := range []string{
		"v1", w.cfg.Matrix.Homeserver, string(b.router.UserID()), string(p.spec.Alias), string(p.spec.ID),
		strings.Join(members, ","), strings.Join(invite, ","),
	} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// where names p for an error: the config key with its file:line, or the
// directly named reference.
func (p *roomPlan) where(w *world) string {
	if p.cfgKey == "" {
		return strings.TrimPrefix(p.key, "ref:")
	}
	return fmt.Sprintf("%s (%s:%d)", p.cfgKey, filepath.Base(w.cfg.Path), w.cfg.Line("rooms."+p.cfgKey))
}

// provisionRooms makes sure every room of w's configuration exists and
// that the router and the agents configured for it are joined, and fills
// w.rooms and w.joined.
//
// What was provisioned is remembered (tracking.ProvisionedRoom). A room
// whose configuration hashes as it did last time and whose accounts are
// all still joined (one /joined_rooms request per account, whatever the
// number of rooms) is taken as it is, without a request of its own. Every
// other room (new, changed, never finished, or left by an account) is
// provisioned again: resolved or created, joined, its people invited, at
// most provisionWorkers rooms at a time. The first failure stops the rest
// and is returned naming the room and its config line.
func (b *Bot) provisionRooms(ctx context.Context, w *world) error {
	log := zerolog.Ctx(ctx)
	start := time.Now()
	plans := b.roomPlans(w)
	remembered, err := b.track.ProvisionedRooms(ctx)
	if err != nil {
		return err
	}
	b.reuseRemembered(ctx, plans, remembered)

	var todo []*roomPlan
	for _, p := range plans {
		if p.roomID == "" {
			todo = append(todo, p)
		}
	}
	err = forEachBounded(ctx, todo, func(ctx context.Context, p *roomPlan) error {
		roomID, err := b.router.EnsureRoom(ctx, p.spec, p.members)
		if err != nil {
			return fmt.Errorf("failed to provision room %s: %w", p.where(w), err)
		}
		if err := b.invitePeople(ctx, roomID, p.invite); err != nil {
			return fmt.Errorf("failed to invite people to room %s: %w", p.where(w), err)
		}
		accounts := []id.UserID{b.router.UserID()}
		for _, a := range p.members {
			accounts = append(accounts, a.UserID())
		}
		if err := b.track.RememberProvisioned(ctx, tracking.ProvisionedRoom{
			Key: p.key, RoomID: roomID, SpecHash: p.hash, Accounts: accounts,
		}); err != nil {
			return err
		}
		p.roomID, p.fresh = roomID, true
		log.Info().Str("room", strings.TrimPrefix(strings.TrimPrefix(p.key, "room:"), "ref:")).
			Stringer("room_id", roomID).Int("agents", len(p.members)).Msg("room ready")
		return nil
	})
	if err != nil {
		return err
	}

	for _, p := range plans {
		if p.fresh {
			w.fresh = append(w.fresh, p.key)
		}
		if p.cfgKey != "" {
			w.rooms[p.cfgKey] = p.roomID
			w.joined[hooks.RouterName] = append(w.joined[hooks.RouterName], p.roomID)
		}
		for _, a := range p.members {
			e := w.accounts[a.UserID()]
			w.joined[e.name] = append(w.joined[e.name], p.roomID)
		}
	}
	// Rooms no longer configured are forgotten: configured again, they are
	// provisioned again.
	planned := make(map[string]bool, len(plans))
	for _, p := range plans {
		planned[p.key] = true
	}
	var gone []string
	for key := range remembered {
		if !planned[key] {
			gone = append(gone, key)
		}
	}
	if len(gone) > 0 {
		if _, err := b.track.ForgetProvisioned(ctx, gone...); err != nil {
			log.Warn().Err(err).Msg("failed to forget rooms removed from the configuration")
		}
	}
	b.syncSpace(ctx, w) // space.go
	log.Info().Int("rooms", len(plans)).Int("remembered", len(plans)-len(todo)).Int("provisioned", len(todo)).
		Dur("took", time.Since(start)).Msg("rooms provisioned")
	return nil
}

// reuseRemembered sets the room id of every plan that was provisioned
// before with the same configuration and whose accounts are all still
// joined. A plan it cannot vouch for is left to be provisioned again.
func (b *Bot) reuseRemembered(ctx context.Context, plans []*roomPlan, remembered map[string]tracking.ProvisionedRoom) {
	var candidates []*roomPlan
	accounts := map[id.UserID]*matrixio.Account{}
	for _, p := range plans {
		if r, ok := remembered[p.key]; ok && r.SpecHash == p.hash {
			candidates = append(candidates, p)
			accounts[b.router.UserID()] = b.router
			for _, a := range p.members {
				accounts[a.UserID()] = a
			}
		}
	}
	if len(candidates) == 0 {
		return
	}
	var list []*matrixio.Account
	for _, a := range accounts {
		list = append(list, a)
	}
	var mu sync.Mutex
	joined := map[id.UserID]map[id.RoomID]bool{} // only the accounts whose list came back
	_ = forEachBounded(ctx, list, func(ctx context.Context, a *matrixio.Account) error {
		rooms, err := a.JoinedRooms(ctx)
		if err != nil {
			// Its rooms are provisioned again, which reports a real problem.
			zerolog.Ctx(ctx).Warn().Err(err).Stringer("account", a.UserID()).
				Msg("failed to list joined rooms; provisioning its rooms again")
			return nil
		}
		set := make(map[id.RoomID]bool, len(rooms))
		for _, r := range rooms {
			set[r] = true
		}
		mu.Lock()
		joined[a.UserID()] = set
		mu.Unlock()
		return nil
	})
	for _, p := range candidates {
		roomID := remembered[p.key].RoomID
		ok := joined[b.router.UserID()][roomID]
		for _, a := range p.members {
			ok = ok && joined[a.UserID()][roomID]
		}
		if ok {
			p.roomID = roomID
		} else {
			zerolog.Ctx(ctx).Info().Str("room", p.key).Stringer("room_id", roomID).
				Msg("an account is no longer joined to a remembered room; provisioning it again")
		}
	}
}

// forEachBounded calls fn for every item, at most provisionWorkers at a
// time. The first error cancels the context of the calls still running,
// starts no more, and is returned once all calls have returned.
func forEachBounded[T any](ctx context.Context, items []T, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, provisionWorkers)
	for _, item := range items {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, item); err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx) // the parent context ended
	}
	return first
}
