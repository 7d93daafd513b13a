package tracking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const (
	roomA  = id.RoomID("!a:localhost")
	roomB  = id.RoomID("!b:localhost")
	router = id.UserID("@router:localhost")
	agent  = id.UserID("@agent:localhost")
	alice  = id.UserID("@alice:localhost")
	bob    = id.UserID("@bob:localhost")
	carol  = id.UserID("@carol:localhost")
)

// syncEvent builds an event the way a sync delivers it: decoded from the server's JSON.
func syncEvent(t testing.TB, room id.RoomID, eventID id.EventID, body string) *event.Event {
	t.Helper()
	raw := fmt.Sprintf(`{"event_id":%q,"room_id":%q,"sender":"@alice:localhost","type":"m.room.message",`+
		`"origin_server_ts":1700000000000,"content":{"msgtype":"m.text","body":%q,"com.example.custom":{"k":[1,2]}}}`,
		eventID, room, body)
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Type.Class = event.MessageEventType
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	return &ev
}

func memberEvent(t testing.TB, room id.RoomID, eventID id.EventID, user id.UserID) *event.Event {
	t.Helper()
	raw := fmt.Sprintf(`{"event_id":%q,"room_id":%q,"sender":%q,"type":"m.room.member","state_key":%q,`+
		`"origin_server_ts":1700000000001,"content":{"membership":"join","displayname":"Alice"}}`,
		eventID, room, user, user)
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	return &ev
}

func ids(evs []*event.Event) []id.EventID {
	out := make([]id.EventID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestRecordDeduplicatesAcrossAccounts(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		first := syncEvent(t, roomA, "$1", "hello")
		tests := []struct {
			name    string
			ev      *event.Event
			seenBy  id.UserID
			wantNew bool
			wantErr error
		}{
			{"first sight", first, router, true, nil},
			{"same account again", first, router, false, nil},
			{"another account", first, agent, false, nil},
			{"same id other content", syncEvent(t, roomA, "$1", "changed"), agent, false, nil},
			{"another event", syncEvent(t, roomA, "$2", "hi"), agent, true, nil},
			{"same id in another room", syncEvent(t, roomB, "$2", "hi"), router, false, nil},
			{"no event id", &event.Event{RoomID: roomA, Type: event.EventMessage}, router, false, ErrIncompleteEvent},
			{"no room id", &event.Event{ID: "$3", Type: event.EventMessage}, router, false, ErrIncompleteEvent},
			{"nil event", nil, router, false, ErrIncompleteEvent},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				isNew, err := s.Record(ctx, tt.ev, tt.seenBy)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Record error = %v, want %v", err, tt.wantErr)
				}
				if isNew != tt.wantNew {
					t.Errorf("Record isNew = %v, want %v", isNew, tt.wantNew)
				}
			})
		}
		pending, err := s.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(pending); len(got) != 2 || got[0] != "$1" || got[1] != "$2" {
			t.Fatalf("pending = %v, want [$1 $2]", got)
		}
		// The first recording wins: its content is what is replayed.
		if body := pending[0].Content.AsMessage().Body; body != "hello" {
			t.Errorf("replayed body = %q, want the first recording's %q", body, "hello")
		}
		if n, err := s.Backlog(ctx); n != 2 || err != nil {
			t.Errorf("Backlog = %d, %v; want 2", n, err)
		}
		if err := s.MarkHandled(ctx, "$1"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Backlog(ctx); n != 1 || err != nil {
			t.Errorf("Backlog after one was handled = %d, %v; want 1", n, err)
		}
	})
}

func TestRecordBatch(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		tests := []struct {
			name      string
			before    []id.EventID // recorded one by one first
			batch     []id.EventID
			wantFresh []id.EventID
			wantErr   error
		}{
			{"all new", nil, []id.EventID{"$1", "$2", "$3"}, []id.EventID{"$1", "$2", "$3"}, nil},
			{"some seen by another account", []id.EventID{"$2"}, []id.EventID{"$1", "$2", "$3"}, []id.EventID{"$1", "$3"}, nil},
			{"duplicate inside the batch", nil, []id.EventID{"$1", "$1", "$2"}, []id.EventID{"$1", "$2"}, nil},
			{"all seen", []id.EventID{"$1", "$2"}, []id.EventID{"$2", "$1"}, nil, nil},
			{"empty", nil, nil, nil, nil},
			{"an incomplete event records nothing", nil, []id.EventID{"$1", ""}, nil, ErrIncompleteEvent},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := newStore(t, d)
				for _, eid := range tt.before {
					if _, err := s.Record(ctx, syncEvent(t, roomA, eid, "x"), agent); err != nil {
						t.Fatal(err)
					}
				}
				batch := make([]*event.Event, len(tt.batch))
				for i, eid := range tt.batch {
					batch[i] = syncEvent(t, roomA, eid, "x")
					if eid == "" {
						batch[i].ID = ""
					}
				}
				fresh, err := s.RecordBatch(ctx, router, batch)
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("RecordBatch error = %v, want %v", err, tt.wantErr)
				}
				if got := ids(fresh); fmt.Sprint(got) != fmt.Sprint(tt.wantFresh) {
					t.Errorf("fresh = %v, want %v", got, tt.wantFresh)
				}
				pending, err := s.Pending(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if tt.wantErr != nil && len(pending) != len(tt.before) {
					t.Errorf("a failed batch left %d events, want %d", len(pending), len(tt.before))
				}
			})
		}
	})
}

func TestMarkHandled(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		for _, eid := range []id.EventID{"$1", "$2", "$3"} {
			if _, err := s.Record(ctx, syncEvent(t, roomA, eid, "x"), router); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			name        string
			eventID     id.EventID
			wantErr     error
			wantPending []id.EventID
		}{
			{"handle the middle one", "$2", nil, []id.EventID{"$1", "$3"}},
			{"again is harmless", "$2", nil, []id.EventID{"$1", "$3"}},
			{"unknown event", "$nope", ErrNotRecorded, []id.EventID{"$1", "$3"}},
			{"the first", "$1", nil, []id.EventID{"$3"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if err := s.MarkHandled(ctx, tt.eventID); !errors.Is(err, tt.wantErr) {
					t.Fatalf("MarkHandled = %v, want %v", err, tt.wantErr)
				}
				pending, err := s.Pending(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprint(ids(pending)) != fmt.Sprint(tt.wantPending) {
					t.Errorf("pending = %v, want %v", ids(pending), tt.wantPending)
				}
			})
		}
		// A handled event stays known: seeing it again is not new.
		if isNew, err := s.Record(ctx, syncEvent(t, roomA, "$2", "x"), agent); err != nil || isNew {
			t.Errorf("Record of a handled event = %v, %v; want false", isNew, err)
		}
	})
}

func TestPendingAfterReopenIsReplayable(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := openStore(t, d, path)
		msg := syncEvent(t, roomA, "$msg", "hello *world*")
		member := memberEvent(t, roomB, "$member", alice)
		if _, err := s.RecordBatch(ctx, router, []*event.Event{msg, syncEvent(t, roomA, "$done", "x")}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Record(ctx, member, agent); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkHandled(ctx, "$done"); err != nil {
			t.Fatal(err)
		}

		s2, _ := reopen(t, d, db, path)
		pending, err := s2.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(pending)) != "[$msg $member]" {
			t.Fatalf("pending after reopen = %v, want [$msg $member]", ids(pending))
		}
		got := pending[0]
		if got.RoomID != roomA || got.Sender != alice || got.Timestamp != 1700000000000 || got.Type != event.EventMessage {
			t.Errorf("replayed message = %+v", got)
		}
		if m := got.Content.AsMessage(); m.Body != "hello *world*" || m.MsgType != event.MsgText {
			t.Errorf("replayed content = %+v", m)
		}
		// Content is stored byte for byte as the server sent it, custom fields included.
		if string(got.Content.VeryRaw) != string(msg.Content.VeryRaw) {
			t.Errorf("replayed raw content = %s, want %s", got.Content.VeryRaw, msg.Content.VeryRaw)
		}
		if m := pending[1].Content.AsMember(); pending[1].Type != event.StateMember || m.Membership != event.MembershipJoin ||
			pending[1].StateKey == nil || *pending[1].StateKey != string(alice) {
			t.Errorf("replayed member event = %+v (%+v)", pending[1], m)
		}
		if !pending[1].Type.IsState() || got.Type.Class != event.MessageEventType {
			t.Errorf("classes = %v / %v, want state / message", pending[1].Type.Class, got.Type.Class)
		}
	})
}

// crashChildEnv tells the test binary to act as a process that records events and dies.
const crashChildEnv = "TRACKING_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
	}
	pgtest.Main(m)
}

// crashChild records three events, handles one, and is killed with SIGKILL while its
// database is still open (no Close, no checkpoint).
func crashChild(path string) {
	ctx := context.Background()
	db, err := OpenSQLite(ctx, path)
	if err != nil {
		panic(err)
	}
	s := New(db)
	if err := s.Upgrade(ctx); err != nil {
		panic(err)
	}
	var evs []*event.Event
	for _, eid := range []id.EventID{"$c1", "$c2", "$c3"} {
		evs = append(evs, &event.Event{ID: eid, RoomID: roomA, Sender: alice, Type: event.EventMessage,
			Content: event.Content{Parsed: &event.MessageEventContent{MsgType: event.MsgText, Body: string(eid)}}})
	}
	if _, err := s.RecordBatch(ctx, router, evs); err != nil {
		panic(err)
	}
	if err := s.MarkHandled(ctx, "$c2"); err != nil {
		panic(err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

func TestPendingSurvivesSIGKILL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookroom.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
	}
	s, _ := openStore(t, dbtest.SQLite, path)
	pending, err := s.Pending(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ids(pending)) != "[$c1 $c3]" {
		t.Fatalf("pending after a crash = %v, want [$c1 $c3]", ids(pending))
	}
	if body := pending[1].Content.AsMessage().Body; body != "$c3" {
		t.Errorf("replayed body = %q", body)
	}
}

func TestConcurrentRecordOfOneEventHasOneWinner(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		const accounts, rounds = 5, 20
		for round := range rounds {
			ev := syncEvent(t, roomA, id.EventID(fmt.Sprintf("$r%d", round)), "x")
			winners, errs := dbtest.Race(accounts, func(i int) (bool, error) {
				account := id.UserID(fmt.Sprintf("@acct%d:localhost", i))
				if i%2 == 0 {
					return s.Record(ctx, ev, account)
				}
				fresh, err := s.RecordBatch(ctx, account, []*event.Event{ev})
				return len(fresh) == 1, err
			})
			if len(errs) > 0 || winners != 1 {
				t.Fatalf("round %d: %d of %d concurrent records were new (errors: %v), want exactly 1", round, winners, accounts, errs)
			}
		}
	})
}

func TestPrune(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		day := 24 * time.Hour
		t0 := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
		tests := []struct {
			name      string
			olderThan time.Duration
			wantGone  int64
			wantLeft  []id.EventID // still known (recording them again is not new)
		}{
			{"nothing old enough", 30 * day, 0, []id.EventID{"$old", "$recent", "$open"}},
			{"handled long ago", 7 * day, 1, []id.EventID{"$recent", "$open"}},
			{"everything handled", 0, 2, []id.EventID{"$open"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				s := newStore(t, d)
				now := t0
				s.now = func() time.Time { return now }
				for _, eid := range []id.EventID{"$old", "$recent", "$open"} {
					if _, err := s.Record(ctx, syncEvent(t, roomA, eid, "x"), router); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.MarkHandled(ctx, "$old"); err != nil {
					t.Fatal(err)
				}
				now = t0.Add(9 * day)
				if err := s.MarkHandled(ctx, "$recent"); err != nil {
					t.Fatal(err)
				}
				now = t0.Add(10 * day)
				gone, err := s.Prune(ctx, tt.olderThan)
				if err != nil || gone != tt.wantGone {
					t.Fatalf("Prune = %d, %v; want %d", gone, err, tt.wantGone)
				}
				for _, eid := range tt.wantLeft {
					if isNew, err := s.Record(ctx, syncEvent(t, roomA, eid, "x"), agent); err != nil || isNew {
						t.Errorf("%s: Record after prune = %v, %v; want still known", eid, isNew, err)
					}
				}
				if pending, err := s.Pending(ctx); err != nil || fmt.Sprint(ids(pending)) != "[$open]" {
					t.Errorf("pending after prune = %v, %v; want [$open]", ids(pending), err)
				}
			})
		}
	})
}

func TestMemberJoinMarkers(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := openStore(t, d, path)

		type step struct {
			name string
			do   func(s *Store) (bool, error)
			want bool
		}
		markJoined := func(room id.RoomID, user id.UserID) func(*Store) (bool, error) {
			return func(s *Store) (bool, error) { return s.MarkJoined(ctx, room, user) }
		}
		seeded := func(room id.RoomID) func(*Store) (bool, error) {
			return func(s *Store) (bool, error) { return s.RoomSeeded(ctx, room) }
		}
		seed := func(room id.RoomID, users ...id.UserID) func(*Store) (bool, error) {
			return func(s *Store) (bool, error) { return true, s.SeedMembers(ctx, room, users) }
		}
		steps := []step{
			{"room A not seeded yet", seeded(roomA), false},
			{"seed A with alice and bob", seed(roomA, alice, bob), true},
			{"room A seeded", seeded(roomA), true},
			{"room B still not seeded", seeded(roomB), false},
			{"alice was present: no join", markJoined(roomA, alice), false},
			{"carol joins A: first", markJoined(roomA, carol), true},
			{"carol rejoins A: not first", markJoined(roomA, carol), false},
			{"carol joins B: first there", markJoined(roomB, carol), true},
			{"seeding A again adds no join for carol", seed(roomA, carol, bob), true},
			{"bob still not first", markJoined(roomA, bob), false},
			{"seed B with nobody", seed(roomB), true},
			{"room B seeded", seeded(roomB), true},
			{"alice joins B: first", markJoined(roomB, alice), true},
		}
		for _, st := range steps {
			got, err := st.do(s)
			if err != nil || got != st.want {
				t.Fatalf("%s: got %v, %v; want %v", st.name, got, err, st.want)
			}
		}

		// After a restart nothing fires again.
		s2, _ := reopen(t, d, db, path)
		for _, st := range []step{
			{"A still seeded", seeded(roomA), true},
			{"carol in A after restart", markJoined(roomA, carol), false},
			{"alice in B after restart", markJoined(roomB, alice), false},
			{"bob in B is new", markJoined(roomB, bob), true},
		} {
			got, err := st.do(s2)
			if err != nil || got != st.want {
				t.Fatalf("%s: got %v, %v; want %v", st.name, got, err, st.want)
			}
		}
	})
}

func TestConcurrentMarkJoinedHasOneWinner(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		winners, errs := dbtest.Race(5, func(int) (bool, error) { return s.MarkJoined(ctx, roomA, carol) })
		for _, err := range errs {
			t.Error(err)
		}
		if winners != 1 {
			t.Fatalf("%d of 5 concurrent MarkJoined were first, want 1", winners)
		}
	})
}

func TestUpgradeUsesItsOwnVersionTable(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		path := filepath.Join(t.TempDir(), "hookroom.db")
		s, db := openStore(t, d, path)
		if err := s.Upgrade(ctx); err != nil {
			t.Fatalf("second Upgrade: %v", err)
		}
		checkVersion(t, db, 6)
		for _, table := range []string{"tracking_inbox", "tracking_room", "tracking_member", "tracking_delivery", "tracking_invited_room", "tracking_provisioned_room", "tracking_delivery_intent"} {
			if ok, err := db.TableExists(ctx, table); err != nil || !ok {
				t.Errorf("table %s exists = %v, %v", table, ok, err)
			}
		}
	})
}

func TestOpenSQLite(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		file string
	}{
		{"plain name", "hookroom.db"},
		{"name with URI characters", "odd ?name#100%.db"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			db, err := OpenSQLite(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := New(db).Upgrade(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("database file not at %s: %v", path, err)
			}
			pragmas := []struct{ pragma, want string }{
				{"journal_mode", "wal"},
				{"busy_timeout", "10000"},
				{"foreign_keys", "1"},
				{"synchronous", "1"},
			}
			for _, p := range pragmas {
				var got string
				if err := db.RawDB.QueryRowContext(ctx, "PRAGMA "+p.pragma).Scan(&got); err != nil || got != p.want {
					t.Errorf("PRAGMA %s = %q, %v; want %q", p.pragma, got, err, p.want)
				}
			}
		})
	}
}

func BenchmarkRecord(b *testing.B) {
	s := newStore(b, dbtest.SQLite)
	ctx := context.Background()
	ev := syncEvent(b, roomA, "$x", "a typical short chat message")
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		ev.ID = id.EventID(fmt.Sprintf("$e%d", i))
		if _, err := s.Record(ctx, ev, router); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordDuplicate(b *testing.B) {
	s := newStore(b, dbtest.SQLite)
	ctx := context.Background()
	ev := syncEvent(b, roomA, "$dup", "a typical short chat message")
	if _, err := s.Record(ctx, ev, router); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.Record(ctx, ev, agent); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRecordBatch50(b *testing.B) {
	s := newStore(b, dbtest.SQLite)
	ctx := context.Background()
	batch := make([]*event.Event, 50)
	for i := range batch {
		batch[i] = syncEvent(b, roomA, "$x", "a typical short chat message")
	}
	n := 0
	for b.Loop() {
		for _, ev := range batch {
			ev.ID = id.EventID(fmt.Sprintf("$e%d", n))
			n++
		}
		if _, err := s.RecordBatch(ctx, router, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
}

func TestRecordBatchAcrossStatements(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		const n = 3*batchRows + 5
		var batch []*event.Event
		var want []id.EventID
		for i := range n {
			ev := syncEvent(t, roomA, id.EventID(fmt.Sprintf("$b%03d", i)), "x")
			batch = append(batch, ev)
			if i%3 == 0 { // seen earlier by another account
				if _, err := s.Record(ctx, ev, agent); err != nil {
					t.Fatal(err)
				}
			} else {
				want = append(want, ev.ID)
			}
		}
		fresh, err := s.RecordBatch(ctx, router, batch)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(ids(fresh)) != fmt.Sprint(want) {
			t.Fatalf("fresh = %v\nwant    %v", ids(fresh), want)
		}
		pending, err := s.Pending(ctx)
		if err != nil || len(pending) != n {
			t.Fatalf("pending = %d events, %v; want %d", len(pending), err, n)
		}
	})
}
