package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// outageSizeEnv, when set, adds the full-size outage at the default
// timeline limit (1000) with that many messages in one room; the issue's
// size is 1200 (about 100 s on 2 cores without -race, most of it sending).
// Without it the busy-room run uses a limit of 20 and 120 messages, which
// still exceeds the limit six times (a run with 300 messages at a limit of
// 50 took 75 s under -race on 2 cores).
const outageSizeEnv = "HOOKROOM_OUTAGE_MESSAGES"

// lockedLog is a goroutine-safe log sink the test can read back.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) lines(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for line := range strings.Lines(l.buf.String()) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// While hookroom is down, 6 people write at the same time into two rooms,
// many times more messages than one sync returns. After the restart every
// message is answered exactly once, and the log reports each filled gap.
func TestOutageAnswersEveryMessageOnce(t *testing.T) {
	type outageCase struct {
		name     string
		limit    int // matrix.sync_timeline_limit, 0 for the default (1000)
		rooms    int // the limit is per room: a large one needs a busy room
		messages int
	}
	cases := []outageCase{
		{"limit 10, two rooms", 10, 2, 120},
		{"limit 20, one room", 20, 1, 120},
	}
	if v := os.Getenv(outageSizeEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 1000 {
			t.Fatalf("%s=%q: want a number of messages above the default limit of 1000", outageSizeEnv, v)
		}
		cases = append(cases, outageCase{"default limit, one room", 0, 1, n})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { outage(t, tc.limit, tc.rooms, tc.messages) })
	}
}

func outage(t *testing.T, limit, nRooms, messages int) {
	e := newEnv(t)
	const nPeople = 6
	var people []*hstest.User
	var userIDs []string
	for i := range nPeople {
		u := e.hs.RegisterUser(t, fmt.Sprintf("person%d", i))
		people = append(people, u)
		userIDs = append(userIDs, fmt.Sprintf("%q", u.UserID))
	}
	helper := e.userID("helper")
	var rooms []id.RoomID
	for range nRooms {
		r := createRoom(t, people[0], e.userID("router"), helper)
		for _, u := range people[1:] {
			if _, err := u.Client.JoinRoomByID(context.Background(), r); err != nil {
				t.Fatal(err)
			}
		}
		rooms = append(rooms, r)
	}
	entries, roomNames := roomsByID("r", rooms)
	cfg := e.config(fmt.Sprintf("rooms:\n%sagents:\n  helper:\n    username: %s\n    model: default\n    rooms: [%s]\nauthorization:\n  global_users: [%s]\n",
		entries, e.localpart("helper"), roomNames, strings.Join(userIDs, ", ")))
	if limit > 0 {
		cfg.Matrix.SyncTimelineLimit = limit
	}

	// answers counts message:after_response per source event.
	var mu sync.Mutex
	answers := map[id.EventID]int{}
	cancelled := map[id.EventID]hooks.CancelReason{}
	rec := &events{}
	opts := Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin(), {Name: "count", Hooks: []hooks.Hook{
			hooks.Handle(hooks.MessageAfterResponse, "after", func(_ context.Context, c *hooks.AfterResponseContext) error {
				mu.Lock()
				answers[c.Result.Envelope.SourceEventID]++
				mu.Unlock()
				rec.add("answer:" + string(c.Result.Envelope.SourceEventID))
				return nil
			}),
			hooks.Handle(hooks.MessageCancelled, "cancelled", func(_ context.Context, c *hooks.CancelledContext) error {
				mu.Lock()
				cancelled[c.Info.Envelope.SourceEventID] = c.Info.Reason
				mu.Unlock()
				return nil
			}),
		}}}, hooks.Options{Services: s})
	}}
	var log lockedLog
	e.logs = &log // hookroom's log (info and above)
	e.startWithin(cfg, rec, opts, 120*time.Second).stop(t)

	// The persons' view starts here: their syncs later show every reply.
	since := make([]string, nRooms)
	for i, r := range rooms {
		since[i] = roomSyncToken(t, people[0], r)
	}

	// Down: every person writes into every room at once.
	began := time.Now()
	sent := map[id.EventID]id.RoomID{}
	var wg sync.WaitGroup
	each := messages / (nPeople * nRooms)
	for p, u := range people {
		for _, r := range rooms {
			wg.Go(func() {
				sendTexts(t, u, r, each, func(i int) string { return fmt.Sprintf("@helper person %d says %d", p, i) }, func(ev id.EventID) {
					mu.Lock()
					sent[ev] = r
					mu.Unlock()
				})
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sendTime := time.Since(began)

	began = time.Now()
	second := e.startWithin(cfg, rec, opts, 120*time.Second)
	// Wait for as many answers as messages were sent, then stop hookroom:
	// after an orderly stop no further answer can come, so the counts
	// below are final (a message answered twice shows as another one
	// missing).
	rec.waitFor(t, "answer:", len(sent), 10*time.Minute)
	answerTime := time.Since(began)
	second.stop(t)

	mu.Lock()
	missing, doubled := 0, 0
	received := map[string]bool{}
	for _, m := range rec.list("msg:") {
		received[m[strings.LastIndex(m, ":$")+1:]] = true
	}
	for evID := range sent {
		switch answers[evID] {
		case 0:
			t.Logf("%s: not answered (received %v, cancelled %q)", evID, received[string(evID)], cancelled[evID])
			missing++
		case 1:
		default:
			doubled++
		}
	}
	mu.Unlock()
	if missing > 0 || doubled > 0 {
		t.Errorf("of %d messages sent during the outage, %d were not answered and %d more than once (hooks)", len(sent), missing, doubled)
	}

	// What the people see: exactly one reply by the agent to each message.
	// Dendrite's sync stream takes in sent events a moment after the send
	// returned, so the replies are read until every message has one (or a
	// deadline passes); a doubled reply was sent before hookroom stopped,
	// so it shows by then too.
	var seenMissing, seenDoubled int
	deadline := time.Now().Add(30 * time.Second)
	for {
		replies := map[id.EventID]int{}
		for i, r := range rooms {
			for _, ev := range roomEventsSince(t, people[0], r, since[i]) {
				if ev.Sender != helper || ev.Type != event.EventMessage {
					continue
				}
				rel := ev.Content.AsMessage().RelatesTo
				if rel == nil || rel.Type == event.RelReplace {
					continue
				}
				if to := rel.GetReplyTo(); to != "" {
					replies[to]++
				}
			}
		}
		seenMissing, seenDoubled = 0, 0
		for evID := range sent {
			switch replies[evID] {
			case 0:
				seenMissing++
			case 1:
			default:
				seenDoubled++
			}
		}
		if seenMissing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if seenMissing > 0 || seenDoubled > 0 {
		t.Errorf("in the rooms, %d of %d messages have no reply and %d more than one", seenMissing, len(sent), seenDoubled)
	}

	// Each account's catch-up sync found the rooms limited; each gap is
	// reported with its counts and was filled completely.
	for _, r := range rooms {
		fills := log.lines("Filled a gap in the timeline", string(r), `"method":"resync"`, `"complete":true`)
		if len(fills) == 0 {
			t.Errorf("the log reports no filled gap in %s", r)
		}
		if bad := log.lines("completeness cannot be established", string(r)); len(bad) > 0 {
			t.Errorf("a gap in %s was not filled with certainty: %s", r, bad)
		}
		for _, l := range fills {
			t.Logf("gap: %s", l)
		}
	}
	t.Logf("%d messages by %d people in %d rooms (limit %d): sent in %v, all answered %v after the restart",
		len(sent), nPeople, nRooms, cfg.Matrix.SyncTimelineLimit, sendTime.Round(time.Millisecond), answerTime.Round(time.Millisecond))
}

// roomFilter is an inline sync filter for one room's timeline, up to
// limit events.
func roomFilter(t testing.TB, room id.RoomID, limit int) string {
	t.Helper()
	raw, err := json.Marshal(mautrix.Filter{Room: &mautrix.RoomFilter{
		Rooms:    []id.RoomID{room},
		Timeline: &mautrix.FilterPart{Limit: limit},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// roomSyncToken returns u's current sync position.
func roomSyncToken(t testing.TB, u *hstest.User, room id.RoomID) string {
	t.Helper()
	resp, err := u.Client.FullSyncRequest(context.Background(), mautrix.ReqSync{FilterID: roomFilter(t, room, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return resp.NextBatch
}

// roomEventsSince returns the timeline of room after since, as u's sync
// shows it (one response, which must not be limited: a sync's timeline is
// complete where /messages is not).
func roomEventsSince(t testing.TB, u *hstest.User, room id.RoomID, since string) []*event.Event {
	t.Helper()
	resp, err := u.Client.FullSyncRequest(context.Background(), mautrix.ReqSync{Since: since, FilterID: roomFilter(t, room, 100000)})
	if err != nil {
		t.Fatal(err)
	}
	r := resp.Rooms.Join[room]
	if r == nil {
		t.Fatalf("%s is not in %s's sync", room, u.UserID)
	}
	if r.Timeline.Limited {
		t.Fatalf("%s's sync of %s is limited", u.UserID, room)
	}
	for _, ev := range r.Timeline.Events {
		_ = ev.Content.ParseRaw(ev.Type)
	}
	return r.Timeline.Events
}
