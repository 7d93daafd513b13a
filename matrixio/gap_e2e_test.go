package matrixio_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// runLogged is run with the loop's log written to buf.
func runLogged(t testing.TB, acct *matrixio.Account, sink matrixio.EventSink, buf *syncBuffer) (stop func()) {
	t.Helper()
	log := zerologTo(buf).Level(zerolog.InfoLevel)
	ctx, cancel := context.WithCancel(log.WithContext(context.Background()))
	done := make(chan error, 1)
	go func() { done <- acct.Run(ctx, sink) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v on cancellation, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("sync loop did not stop within 10s of cancellation")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// sendConcurrently has each person send n messages to room at the same
// time as the others and returns the event ids of all of them.
func sendConcurrently(t testing.TB, room id.RoomID, people []*hstest.User, n int) map[id.EventID]bool {
	t.Helper()
	sent := make(map[id.EventID]bool, len(people)*n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p, person := range people {
		wg.Go(func() {
			for i := range n {
				resp, err := person.Client.SendText(context.Background(), room, fmt.Sprintf("person %d message %d", p, i))
				if err != nil {
					t.Errorf("person %d send %d: %v", p, i, err)
					return
				}
				mu.Lock()
				sent[resp.EventID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return sent
}

// TestConcurrentBurstAcrossGapArrivesOnce: several people write into one
// room at the same time while the account's sync loop is stopped, many
// times more messages than one sync returns. After the restart every one
// of them reaches the sink exactly once, and the log says that a gap was
// filled and how. (Paging back with /messages misses events that were
// sent concurrently on Dendrite, so this fails with /messages alone.)
func TestConcurrentBurstAcrossGapArrivesOnce(t *testing.T) {
	for _, tc := range []struct {
		name          string
		limit, people int
		each          int
		// backfill is Config.BackfillLimit; below the burst the re-sync
		// stays limited and the gap cannot be filled with certainty.
		backfill int
	}{
		{"limit 10, 6 people x 20", 10, 6, 20, 0},
		{"limit 50, 6 people x 100", 50, 6, 100, 0},
		{"limit 10, backfill limit 30, 6 people x 20", 10, 6, 20, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := hstest.Shared(t)
			ctx := t.Context()
			dbPath := openDB(t)
			cfg := testConfig(srv)
			cfg.TimelineLimit = tc.limit
			cfg.BackfillLimit = tc.backfill
			incomplete := tc.backfill != 0 && tc.backfill < tc.people*tc.each
			botSpec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
			bot := ensure(t, newManager(t, cfg, reopenDB(t, dbPath)), botSpec)
			var people []*hstest.User
			var invite []id.UserID
			for i := range tc.people {
				u := srv.RegisterUser(t, fmt.Sprintf("person%d", i))
				people = append(people, u)
				invite = append(invite, u.UserID)
			}
			roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "gap", Invite: invite})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range people {
				if _, err := u.Client.JoinRoomByID(ctx, roomID); err != nil {
					t.Fatal(err)
				}
			}
			last := people[len(people)-1].UserID

			var buf syncBuffer
			first := newRecorder()
			stop := runLogged(t, bot, first, &buf)
			first.waitFor(t, 30*time.Second, "the last join", func(b []matrixio.SyncBatch) bool {
				return len(timelineEvents(b, roomID, fromSender(last, event.StateMember))) > 0
			})
			stop()

			sent := sendConcurrently(t, roomID, people, tc.each)

			bot = ensure(t, newManager(t, cfg, reopenDB(t, dbPath)), botSpec)
			second := newRecorder()
			runLogged(t, bot, second, &buf)
			// A sentinel sent after the restart: once it arrived, every batch
			// that could carry a burst message (or a copy of one) was handed
			// over, because batches arrive in order.
			sentinel, err := people[0].Client.SendText(ctx, roomID, "sentinel")
			if err != nil {
				t.Fatal(err)
			}
			batches := second.waitFor(t, 60*time.Second, "the sentinel", func(b []matrixio.SyncBatch) bool {
				return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == sentinel.EventID })) > 0
			})

			counts := map[id.EventID]int{}
			for _, evt := range timelineEvents(batches, roomID, func(e *event.Event) bool { return e.Type == event.EventMessage }) {
				counts[evt.ID]++
			}
			missing, doubled := 0, 0
			for evID := range sent {
				switch counts[evID] {
				case 0:
					missing++
				case 1:
				default:
					doubled++
				}
			}
			if doubled > 0 || (missing > 0 && !incomplete) {
				t.Errorf("of %d messages sent while stopped: %d never reached the sink, %d reached it more than once", len(sent), missing, doubled)
			}
			filled := 0
			for _, b := range batches {
				for _, r := range b.Rooms {
					if r.RoomID != roomID {
						continue
					}
					want := matrixio.FillResync
					if incomplete {
						want = matrixio.FillMessages
					}
					if r.Gap != (r.Limited && incomplete) {
						t.Errorf("limited %v, gap %v (filled by %q): want a gap exactly when the re-sync is limited too", r.Limited, r.Gap, r.FilledBy)
					}
					if r.Limited {
						if r.FilledBy != want {
							t.Errorf("limited timeline filled by %q, want %q", r.FilledBy, want)
						}
						filled++
					}
				}
			}
			if filled == 0 {
				t.Errorf("no limited timeline: the burst did not exercise gap filling")
			}
			// One warning per filled gap, with the room, the method and the counts.
			fills := logLines(buf.String(), "Filled a gap in the timeline", string(roomID), `"method":"resync"`, `"complete":true`, `"fetched":`, `"sync_returned":`)
			if incomplete {
				// Never silently: the log says the gap may have lost events.
				fills = logLines(buf.String(), "completeness cannot be established", string(roomID), `"method":"messages"`, `"complete":false`, `"fetched":`, `"sync_returned":`)
			}
			if len(fills) != filled {
				t.Errorf("the log reports %d filled gaps in the room, the batches %d:\n%s", len(fills), filled, lastLines(buf.String(), 20))
			}
			t.Logf("%d messages, %d missing; gap log: %s", len(sent), missing, strings.Join(fills, " | "))
		})
	}
}

// logLines returns the lines of logs that contain all of parts.
func logLines(logs string, parts ...string) []string {
	var out []string
	for line := range strings.Lines(logs) {
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

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
