package bot

import (
	"context"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
)

// spaceSpec is the root space matrix.space describes, with the global
// users (exact user ids; patterns cannot be invited) to invite. ok is false
// when matrix.space is absent.
func spaceSpec(w *world) (spec matrixio.SpaceSpec, ok bool) {
	sp := w.cfg.Matrix.Space
	if sp == nil {
		return spec, false
	}
	spec = matrixio.SpaceSpec{Alias: sp.FullAlias(w.cfg.Matrix.ServerName), Name: sp.DisplayName()}
	for _, u := range w.cfg.Authorization.GlobalUsers {
		if !strings.ContainsAny(string(u), "*?") {
			spec.Invite = append(spec.Invite, u)
		}
	}
	return spec, true
}

// spaceRooms lists the rooms provisioning put w's accounts in: the
// children the root space should have.
func spaceRooms(w *world) []id.RoomID {
	var rooms []id.RoomID
	for _, joined := range w.joined {
		rooms = append(rooms, joined...)
	}
	slices.Sort(rooms)
	return slices.Compact(rooms)
}

// syncSpace keeps the root space (matrix.space) in step with w's rooms:
// the router creates it once (found again by its alias), links every
// provisioned room into it, removes rooms no longer configured, and invites
// the global users. Called after provisioning, at start-up and on reload.
// A failure is logged: the rooms work without the space.
func (b *Bot) syncSpace(ctx context.Context, w *world) {
	spec, ok := spaceSpec(w)
	if !ok {
		return
	}
	log := zerolog.Ctx(ctx).With().Stringer("space_alias", spec.Alias).Logger()
	res, err := b.router.SyncSpace(ctx, spec, spaceRooms(w))
	if err != nil {
		log.Warn().Err(err).Msg("failed to update the root space; the rooms work without it")
		return
	}
	log.Info().Stringer("space_id", res.SpaceID).Bool("created", res.Created).Int("added", len(res.Added)).
		Int("removed", len(res.Removed)).Int("invited", len(res.Invited)).Msg("root space up to date")
}
