package matrixio

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// How a gap in a room's timeline was filled (RoomEvents.FilledBy).
const (
	// FillResync: the same range was synced again, from the same position,
	// with a timeline limit of Config.BackfillLimit, and the server said
	// the timeline was complete (not limited). Homeservers order a sync's
	// timeline by their event stream, so the answer holds every event.
	FillResync = "resync"
	// FillMessages: the gap was paged back with /messages. Its pagination
	// follows the room graph, not the stream, and can skip events that
	// were sent concurrently (measured on Dendrite 0.15.2): completeness
	// cannot be established, so RoomEvents.Gap is set as well.
	FillMessages = "messages"
)

// gapFill describes how Run filled the limited timelines of one sync
// response before buildBatch turns it into a batch.
type gapFill struct {
	// synced holds, per room whose timeline needed filling, how many
	// timeline events the first response carried.
	synced map[id.RoomID]int
	// resynced is true when the response was replaced by a re-sync with
	// the large limit; false when the re-sync failed and /messages must
	// fill the gaps.
	resynced bool
}

// needsFill reports whether a room's timeline in an incremental sync left
// out events the account has not seen. A timeline that is limited only
// because the account joined the room in this range holds the join and
// everything after it (timelines are the newest events), so nothing the
// account could have seen is missing: what came before is history.
func needsFill(tl mautrix.SyncTimeline, self id.UserID) bool {
	if !tl.Limited {
		return false
	}
	for _, evt := range tl.Events {
		if evt == nil || evt.Type != event.StateMember || evt.GetStateKey() != self.String() {
			continue
		}
		var c struct {
			Membership event.Membership `json:"membership"`
		}
		if err := json.Unmarshal(evt.Content.VeryRaw, &c); err == nil && c.Membership == event.MembershipJoin {
			prev := event.Membership("")
			if evt.Unsigned.PrevContent != nil && evt.Unsigned.PrevContent.VeryRaw != nil {
				var p struct {
					Membership event.Membership `json:"membership"`
				}
				_ = json.Unmarshal(evt.Unsigned.PrevContent.VeryRaw, &p)
				prev = p.Membership
			}
			if prev != event.MembershipJoin {
				return false
			}
		}
	}
	return true
}

// limitedRooms returns the rooms of resp whose timelines need filling,
// with how many timeline events each carries.
func limitedRooms(resp *mautrix.RespSync, self id.UserID) map[id.RoomID]int {
	var out map[id.RoomID]int
	add := func(roomID id.RoomID, tl mautrix.SyncTimeline) {
		if needsFill(tl, self) {
			if out == nil {
				out = map[id.RoomID]int{}
			}
			out[roomID] = len(tl.Events)
		}
	}
	for roomID, room := range resp.Rooms.Join {
		add(roomID, room.Timeline)
	}
	for roomID, room := range resp.Rooms.Leave {
		add(roomID, room.Timeline)
	}
	return out
}

// gapFilter is syncFilter with the timeline limit raised to BackfillLimit,
// sent inline: it is used only for the re-sync that fills a gap.
func (a *Account) gapFilter() (string, error) {
	filter := a.syncFilter()
	filter.Room.Timeline.Limit = max(a.m.cfg.BackfillLimit, a.m.cfg.TimelineLimit)
	raw, err := json.Marshal(filter)
	if err != nil {
		return "", fmt.Errorf("failed to marshal gap filter: %w", err)
	}
	return string(raw), nil
}

// fillGaps checks an incremental sync response for limited timelines. If
// there are any, it syncs the same range again (from since, without
// waiting) with a timeline limit of BackfillLimit and returns that response
// instead: it covers the first one (the same position, later or equal
// end), and every room's timeline in it is complete unless the server
// still says limited. The caller must not have processed resp's to-device
// events yet: the re-sync carries them again. When the re-sync fails,
// resp is returned and fill says that /messages must fill the gaps.
func (a *Account) fillGaps(ctx context.Context, resp *mautrix.RespSync, since string) (*mautrix.RespSync, *gapFill) {
	if since == "" {
		return resp, nil
	}
	synced := limitedRooms(resp, a.userID)
	if len(synced) == 0 {
		return resp, nil
	}
	fill := &gapFill{synced: synced}
	log := zerolog.Ctx(ctx)
	filter, err := a.gapFilter()
	if err != nil {
		log.Err(err).Int("rooms", len(synced)).Msg("Cannot re-sync to fill timeline gaps; paging back with /messages, whose completeness cannot be established")
		return resp, fill
	}
	var full *mautrix.RespSync
	err = a.do(ctx, "re-sync to fill timeline gaps", retryTransient, func(ctx context.Context) (err error) {
		full, err = a.cli().FullSyncRequest(ctx, mautrix.ReqSync{Since: since, FilterID: filter})
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			log.Err(err).Int("rooms", len(synced)).Msg("Failed to re-sync to fill timeline gaps; paging back with /messages, whose completeness cannot be established")
		}
		return resp, fill
	}
	fill.resynced = true
	return full, fill
}

// logFill reports how one room's gap was filled. fetched is the number of
// timeline events handed over for the room, synced how many the first
// sync response carried.
func logFill(ctx context.Context, re *RoomEvents, synced int) {
	log := zerolog.Ctx(ctx)
	var ev *zerolog.Event
	if re.Gap {
		ev = log.Warn().Bool("complete", false)
	} else {
		ev = log.Warn().Bool("complete", true)
	}
	ev = ev.Stringer("room_id", re.RoomID).
		Str("method", re.FilledBy).
		Int("sync_returned", synced).
		Int("fetched", re.Backfilled).
		Int("events", len(re.Timeline))
	if re.Gap {
		ev.Msg("Filled a gap in the timeline, but its completeness cannot be established; events may be missing")
		return
	}
	ev.Msg("Filled a gap in the timeline")
}
