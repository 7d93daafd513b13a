package matrixio_test

// End-to-end tests against a real Dendrite started by hstest. They live in
// the external test package so hstest may import matrixio one day.

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	_ "modernc.org/sqlite"

	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

func TestMain(m *testing.M) { hstest.Main(pgtest.Wrap(m)) }

// unique returns a localpart-safe name unique to this test run.
func unique(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// openDB opens a fresh SQLite database file. Opening the same path again
// (reopenDB) simulates a process restart.
func openDB(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "hookroom.db")
}

func reopenDB(t testing.TB, path string) *matrixio.Store {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	db, err := dbutil.NewWithDB(raw, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store := matrixio.NewStore(db)
	if err := store.Upgrade(t.Context()); err != nil {
		t.Fatal(err)
	}
	return store
}

func testConfig(srv *hstest.Server) matrixio.Config {
	return matrixio.Config{
		HomeserverURL: srv.URL,
		ServerName:    srv.ServerName,
		Registration:  matrixio.Registration{SharedSecret: srv.Secret},
		SyncTimeout:   2 * time.Second,
		Retry:         matrixio.RetryPolicy{InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
	}
}

func newManager(t testing.TB, cfg matrixio.Config, store *matrixio.Store) *matrixio.Manager {
	t.Helper()
	m, err := matrixio.NewManager(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func ensure(t testing.TB, m *matrixio.Manager, spec matrixio.AccountSpec) *matrixio.Account {
	t.Helper()
	acct, err := m.EnsureAccount(t.Context(), spec)
	if err != nil {
		t.Fatalf("EnsureAccount(%s): %v", spec.Localpart, err)
	}
	return acct
}

// recorder is an EventSink that keeps every batch and can refuse some.
type recorder struct {
	mu      sync.Mutex
	batches []matrixio.SyncBatch
	refuse  func(matrixio.SyncBatch) error // nil accepts everything
	notify  chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{}, 1)} }

func (r *recorder) HandleSync(_ context.Context, _ id.UserID, b matrixio.SyncBatch) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil {
		if err := r.refuse(b); err != nil {
			return err
		}
	}
	r.batches = append(r.batches, b)
	select {
	case r.notify <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) snapshot() []matrixio.SyncBatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]matrixio.SyncBatch(nil), r.batches...)
}

// waitFor polls the recorded batches until cond holds or the deadline
// passes (then it fails the test with what).
func (r *recorder) waitFor(t testing.TB, timeout time.Duration, what string, cond func([]matrixio.SyncBatch) bool) []matrixio.SyncBatch {
	t.Helper()
	deadline := time.After(timeout)
	for {
		b := r.snapshot()
		if cond(b) {
			return b
		}
		select {
		case <-r.notify:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out after %v waiting for %s (%d batches)", timeout, what, len(b))
		}
	}
}

// timelineEvents returns the timeline events of room across batches that
// match pred, in delivery order.
func timelineEvents(batches []matrixio.SyncBatch, room id.RoomID, pred func(*event.Event) bool) []*event.Event {
	var out []*event.Event
	for _, b := range batches {
		for _, r := range b.Rooms {
			if r.RoomID != room {
				continue
			}
			for _, evt := range r.Timeline {
				if pred(evt) {
					out = append(out, evt)
				}
			}
		}
	}
	return out
}

// run starts acct's sync loop and returns a function that stops it and
// returns Run's error. The loop is stopped on cleanup as well.
func run(t testing.TB, acct *matrixio.Account, sink matrixio.EventSink) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- acct.Run(ctx, sink) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				runErr = errors.New("sync loop did not stop within 10s of cancellation")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func fromSender(sender id.UserID, evtType event.Type) func(*event.Event) bool {
	return func(evt *event.Event) bool { return evt.Sender == sender && evt.Type.Type == evtType.Type }
}

func TestEnsureAccountCreatesAndReusesDevice(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	spec := matrixio.AccountSpec{Localpart: unique(t, "agent"), DisplayName: "Agent Smith"}

	acct := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	wantUser := id.NewUserID(spec.Localpart, srv.ServerName)
	if acct.UserID() != wantUser || acct.DeviceID() == "" {
		t.Fatalf("account = %s device %q, want %s with a device", acct.UserID(), acct.DeviceID(), wantUser)
	}
	firstDevice := acct.DeviceID()

	observer := srv.RegisterUser(t, unique(t, "observer"))
	name, err := observer.Client.GetDisplayName(ctx, acct.UserID())
	if err != nil || name.DisplayName != "Agent Smith" {
		t.Errorf("display name = %+v, %v; want Agent Smith", name, err)
	}
	devices, err := acct.Client().GetDevicesInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(devices.Devices) != 1 || devices.Devices[0].DeviceID != firstDevice {
		t.Errorf("devices = %+v, want exactly the hookroom device %s (registration device dropped)", devices.Devices, firstDevice)
	}

	// Restart: a new Store and Manager on the same database reuse the token.
	again := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	if again.DeviceID() != firstDevice {
		t.Errorf("after restart device = %s, want %s", again.DeviceID(), firstDevice)
	}

	// The device is deleted (logged out elsewhere): its encryption keys are
	// gone with it, and clients refuse new keys under a device id they
	// know, so the stored password logs in on a new device with new keys.
	if _, err := again.Client().Logout(ctx); err != nil {
		t.Fatal(err)
	}
	relogged := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	if relogged.DeviceID() == firstDevice || relogged.DeviceID() == "" {
		t.Errorf("after re-login device = %q, want a new device (not %s)", relogged.DeviceID(), firstDevice)
	}
	if whoami, err := relogged.Client().Whoami(ctx); err != nil || whoami.UserID != wantUser {
		t.Errorf("whoami after re-login = %+v, %v", whoami, err)
	}
	keys, err := observer.Client.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{wantUser: nil}})
	if err != nil {
		t.Fatal(err)
	}
	if dev, ok := keys.DeviceKeys[wantUser][relogged.DeviceID()]; !ok || len(dev.Keys) == 0 {
		t.Errorf("new device %s has no keys on the homeserver: %+v", relogged.DeviceID(), keys.DeviceKeys[wantUser])
	}
	if len(keys.DeviceKeys[wantUser]) != 1 {
		t.Errorf("devices with keys = %d, want only the new one", len(keys.DeviceKeys[wantUser]))
	}
	if keys.MasterKeys[wantUser].UserID != wantUser {
		t.Errorf("no cross-signing master key published for %s", wantUser)
	}
}

func TestEnsureAccountErrors(t *testing.T) {
	srv := hstest.Shared(t)

	t.Run("no registration method", func(t *testing.T) {
		cfg := testConfig(srv)
		cfg.Registration = matrixio.Registration{}
		_, err := newManager(t, cfg, reopenDB(t, openDB(t))).EnsureAccount(t.Context(), matrixio.AccountSpec{Localpart: unique(t, "nobody")})
		if !errors.Is(err, matrixio.ErrNoRegistration) {
			t.Errorf("error = %v, want ErrNoRegistration", err)
		}
	})

	human := srv.RegisterUser(t, unique(t, "human"))
	t.Run("existing account without password", func(t *testing.T) {
		_, err := newManager(t, testConfig(srv), reopenDB(t, openDB(t))).EnsureAccount(t.Context(), matrixio.AccountSpec{Localpart: human.UserID.Localpart()})
		if !errors.Is(err, matrixio.ErrAccountTaken) {
			t.Errorf("error = %v, want ErrAccountTaken", err)
		}
	})
	t.Run("existing account with configured password", func(t *testing.T) {
		acct, err := newManager(t, testConfig(srv), reopenDB(t, openDB(t))).EnsureAccount(t.Context(),
			matrixio.AccountSpec{Localpart: human.UserID.Localpart(), Password: human.Password})
		if err != nil || acct.UserID() != human.UserID {
			t.Errorf("EnsureAccount = %v, %v", acct, err)
		}
	})
	t.Run("wrong configured password", func(t *testing.T) {
		_, err := newManager(t, testConfig(srv), reopenDB(t, openDB(t))).EnsureAccount(t.Context(),
			matrixio.AccountSpec{Localpart: human.UserID.Localpart(), Password: "definitely-wrong"})
		if !errors.Is(err, mautrix.MForbidden) {
			t.Errorf("error = %v, want M_FORBIDDEN", err)
		}
	})
}

func TestEnsureRoomCreatesOnce(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	routerSpec := matrixio.AccountSpec{Localpart: unique(t, "router")}
	agentSpec := matrixio.AccountSpec{Localpart: unique(t, "agent")}
	alias := id.RoomAlias("#" + unique(t, "lobby") + ":" + srv.ServerName)
	spec := matrixio.RoomSpec{Alias: alias, Name: "Lobby", Topic: "where agents live"}

	var roomIDs []id.RoomID
	for restart := range 2 {
		m := newManager(t, testConfig(srv), reopenDB(t, dbPath))
		router, agent := ensure(t, m, routerSpec), ensure(t, m, agentSpec)
		roomID, err := router.EnsureRoom(ctx, spec, []*matrixio.Account{router, agent})
		if err != nil {
			t.Fatalf("EnsureRoom (start %d): %v", restart+1, err)
		}
		roomIDs = append(roomIDs, roomID)

		joined, err := router.JoinedMembers(ctx, roomID)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := joined[router.UserID()]; !ok {
			t.Errorf("router not joined: %v", joined)
		}
		if _, ok := joined[agent.UserID()]; !ok {
			t.Errorf("agent not joined: %v", joined)
		}
		rooms, err := router.JoinedRooms(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rooms) != 1 || rooms[0] != roomID {
			t.Errorf("router is in %v after start %d, want only %s (no second room created)", rooms, restart+1, roomID)
		}
	}
	if roomIDs[0] != roomIDs[1] {
		t.Errorf("EnsureRoom gave %s then %s: the room was created twice", roomIDs[0], roomIDs[1])
	}

	m := newManager(t, testConfig(srv), reopenDB(t, dbPath))
	router := ensure(t, m, routerSpec)
	var name event.RoomNameEventContent
	if err := router.GetState(ctx, roomIDs[0], event.StateRoomName, "", &name); err != nil || name.Name != "Lobby" {
		t.Errorf("room name = %q, %v", name.Name, err)
	}
	if resolved, err := router.ResolveAlias(ctx, alias); err != nil || resolved != roomIDs[0] {
		t.Errorf("alias resolves to %s, %v", resolved, err)
	}
	_, err := router.ResolveAlias(ctx, id.RoomAlias("#"+unique(t, "missing")+":"+srv.ServerName))
	if !errors.Is(err, matrixio.ErrNotFound) {
		t.Errorf("missing alias error = %v, want ErrNotFound", err)
	}
	// Federation is off in the test homeserver, so resolving a foreign alias
	// fails with HTTP 500, which is retried: keep the attempts low here.
	impatient := testConfig(srv)
	impatient.Retry.MaxAttempts = 2
	router = ensure(t, newManager(t, impatient, reopenDB(t, dbPath)), routerSpec)
	_, err = router.EnsureRoom(ctx, matrixio.RoomSpec{Alias: "#elsewhere:other.example"}, nil)
	if !errors.Is(err, matrixio.ErrForeignAlias) {
		t.Errorf("foreign alias error = %v, want ErrForeignAlias", err)
	}
}

// TestBurstWhileStoppedArrivesOnce: 300 messages sent while the account's
// sync loop is stopped reach the sink exactly once, in order, after it
// starts again. The timeline limit is set low so the gap must be filled
// with /messages.
func TestBurstWhileStoppedArrivesOnce(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	cfg := testConfig(srv)
	cfg.TimelineLimit = 20
	cfg.BackfillLimit = 1000
	botSpec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
	bot := ensure(t, newManager(t, cfg, reopenDB(t, dbPath)), botSpec)
	human := srv.RegisterUser(t, unique(t, "human"))

	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "burst", Invite: []id.UserID{human.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := human.Client.JoinRoomByID(ctx, roomID); err != nil {
		t.Fatal(err)
	}

	// First life: sync until the human's join is seen, then stop.
	first := newRecorder()
	stop := run(t, bot, first)
	first.waitFor(t, 30*time.Second, "the human's join", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, fromSender(human.UserID, event.StateMember))) > 0
	})
	if err := stop(); err != nil {
		t.Fatalf("Run returned %v on cancellation, want nil", err)
	}

	const burst = 300
	sent := make([]id.EventID, 0, burst)
	for i := range burst {
		resp, err := human.Client.SendText(ctx, roomID, "burst "+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		sent = append(sent, resp.EventID)
	}

	// Second life: a restarted process (new store and manager, same DB).
	bot = ensure(t, newManager(t, cfg, reopenDB(t, dbPath)), botSpec)
	second := newRecorder()
	run(t, bot, second)
	batches := second.waitFor(t, 60*time.Second, "all burst messages", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, fromSender(human.UserID, event.EventMessage))) >= burst
	})
	// Barrier: a later message reaches the sink after any duplicate of an
	// earlier one would have.
	barrier, err := human.Client.SendText(ctx, roomID, "barrier")
	if err != nil {
		t.Fatal(err)
	}
	batches = second.waitFor(t, 60*time.Second, "the barrier", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == barrier.EventID })) > 0
	})

	got := timelineEvents(batches, roomID, fromSender(human.UserID, event.EventMessage))
	if len(got) != burst+1 || got[burst].ID != barrier.EventID {
		t.Fatalf("sink got %d messages, want exactly %d and then the barrier", len(got), burst)
	}
	got = got[:burst]
	for i, evt := range got {
		if evt.ID != sent[i] {
			t.Fatalf("message %d is %s, want %s (order or duplicates wrong)", i, evt.ID, sent[i])
		}
		if evt.RoomID != roomID {
			t.Fatalf("message %d has room id %q", i, evt.RoomID)
		}
	}
	backfilled, limited := 0, false
	for _, b := range batches {
		if b.Initial {
			t.Error("batch after restart is marked initial")
		}
		for _, r := range b.Rooms {
			if r.RoomID == roomID {
				backfilled += r.Backfilled
				limited = limited || r.Limited
				if r.Gap {
					t.Error("room reported a gap")
				}
			}
		}
	}
	if !limited || backfilled == 0 {
		t.Errorf("limited=%v backfilled=%d: the burst did not exercise gap filling", limited, backfilled)
	}
	t.Logf("%d messages: %d added by filling the gap, %d from the first /sync", burst, backfilled, burst-backfilled)
}

// TestSinkErrorKeepsToken: while the sink refuses a batch the sync token
// is not saved, so the same events are handed over again.
func TestSinkErrorKeepsToken(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	botSpec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), botSpec)
	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "refusals"})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	stop := run(t, bot, rec)
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })

	isTarget := func(e *event.Event) bool {
		return e.Type == event.EventMessage && e.Content.AsMessage().Body == "refuse me twice"
	}
	refusals := 0
	rec.mu.Lock()
	rec.refuse = func(b matrixio.SyncBatch) error {
		if len(timelineEvents([]matrixio.SyncBatch{b}, roomID, isTarget)) > 0 && refusals < 2 {
			refusals++
			return errors.New("inbox unavailable")
		}
		return nil
	}
	rec.mu.Unlock()
	msgID, err := bot.SendText(ctx, roomID, "refuse me twice", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 30*time.Second, "the message after two refusals", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == msgID })) > 0
	})
	rec.mu.Lock()
	if refusals != 2 {
		t.Errorf("sink refused %d times, want 2 (the batch was not handed over again)", refusals)
	}
	rec.mu.Unlock()
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Accepted once, the message is not handed over again after a restart.
	bot = ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), botSpec)
	after := newRecorder()
	run(t, bot, after)
	marker, err := bot.SendText(ctx, roomID, "marker", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	batches := after.waitFor(t, 30*time.Second, "the marker", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == marker })) > 0
	})
	if n := len(timelineEvents(batches, roomID, func(e *event.Event) bool { return e.ID == msgID })); n != 0 {
		t.Errorf("accepted message handed over %d more times after restart", n)
	}
}

// TestFirstSyncFlag: only the account's very first sync is Initial, and it
// carries the members present before hookroom looked; a live join later
// arrives in a non-initial batch.
func TestFirstSyncFlag(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	botSpec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), botSpec)
	early := srv.RegisterUser(t, unique(t, "early"))
	late := srv.RegisterUser(t, unique(t, "late"))

	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "members", Invite: []id.UserID{early.UserID, late.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := early.Client.JoinRoomByID(ctx, roomID); err != nil {
		t.Fatal(err)
	}
	// An invite waiting for the bot before its first sync.
	inviteRoom, err := early.Client.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", Invite: []id.UserID{bot.UserID()}})
	if err != nil {
		t.Fatal(err)
	}

	rec := newRecorder()
	stop := run(t, bot, rec)
	batches := rec.waitFor(t, 30*time.Second, "initial batch", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })
	initial := batches[0]
	if !initial.Initial || initial.Since != "" {
		t.Fatalf("first batch initial=%v since=%q, want initial", initial.Initial, initial.Since)
	}
	if !memberIn(initial, roomID, early.UserID, event.MembershipJoin) {
		t.Errorf("initial batch lacks the early member's join")
	}
	if len(initial.Invites) != 1 || initial.Invites[0].RoomID != inviteRoom.RoomID || initial.Invites[0].Sender != early.UserID {
		t.Errorf("initial invites = %+v, want one from %s to %s", initial.Invites, early.UserID, inviteRoom.RoomID)
	}
	if err := bot.AcceptInvite(ctx, inviteRoom.RoomID); err != nil {
		t.Fatal(err)
	}

	if _, err := late.Client.JoinRoomByID(ctx, roomID); err != nil {
		t.Fatal(err)
	}
	batches = rec.waitFor(t, 30*time.Second, "the live join", func(b []matrixio.SyncBatch) bool {
		for _, x := range b[1:] {
			if memberIn(x, roomID, late.UserID, event.MembershipJoin) {
				return true
			}
		}
		return false
	})
	for _, b := range batches[1:] {
		if b.Initial {
			t.Errorf("a later batch (since %q) is marked initial", b.Since)
		}
	}
	if memberIn(initial, roomID, late.UserID, event.MembershipJoin) {
		t.Error("the late member's join was in the initial batch")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// After a restart nothing is initial any more.
	bot = ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), botSpec)
	rec2 := newRecorder()
	run(t, bot, rec2)
	ping, err := early.Client.SendText(ctx, roomID, "ping")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rec2.waitFor(t, 30*time.Second, "ping after restart", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == ping.EventID })) > 0
	}) {
		if b.Initial {
			t.Error("batch after restart is marked initial")
		}
	}
}

// seenBySync syncs as cli (an independent client, from scratch) until all
// events in want have appeared in room's timeline.
func seenBySync(t testing.TB, cli *mautrix.Client, room id.RoomID, want ...id.EventID) {
	t.Helper()
	missing := map[id.EventID]bool{}
	for _, e := range want {
		missing[e] = true
	}
	since := ""
	testkit.Until(t, 15*time.Second, func() (bool, string) {
		resp, err := cli.FullSyncRequest(t.Context(), mautrix.ReqSync{
			Since:    since,
			Timeout:  1000,
			FilterID: `{"room":{"timeline":{"limit":100}}}`, // an inline filter
		})
		if err != nil {
			return false, fmt.Sprintf("sync failed: %v", err)
		}
		since = resp.NextBatch
		if r := resp.Rooms.Join[room]; r != nil {
			for _, evt := range r.Timeline.Events {
				delete(missing, evt.ID)
			}
		}
		return len(missing) == 0, fmt.Sprintf("%s's sync never showed %v", cli.UserID, missing)
	})
}

func memberIn(b matrixio.SyncBatch, room id.RoomID, user id.UserID, membership event.Membership) bool {
	for _, r := range b.Rooms {
		if r.RoomID != room {
			continue
		}
		for _, evt := range append(append([]*event.Event{}, r.State...), r.Timeline...) {
			if evt.Type == event.StateMember && evt.GetStateKey() == user.String() && evt.Content.AsMember().Membership == membership {
				return true
			}
		}
	}
	return false
}

// TestThreadReplyAndEditVisible: a threaded Markdown reply and its edit,
// read back by another user.
func TestThreadReplyAndEditVisible(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "bot")})
	human := srv.RegisterUser(t, unique(t, "human"))
	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Invite: []id.UserID{human.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := human.Client.JoinRoomByID(ctx, roomID); err != nil {
		t.Fatal(err)
	}
	root, err := human.Client.SendText(ctx, roomID, "question?")
	if err != nil {
		t.Fatal(err)
	}

	latest, err := bot.LatestThreadEvent(ctx, roomID, root.EventID)
	if err != nil || latest != root.EventID {
		t.Fatalf("latest of empty thread = %s, %v; want the root", latest, err)
	}
	reply, err := bot.SendText(ctx, roomID, "**first** answer", matrixio.SendOptions{
		TxnKey:     matrixio.TxnKey(root.EventID, "reply"),
		ThreadRoot: root.EventID,
		Mentions:   []id.UserID{human.UserID},
	})
	if err != nil {
		t.Fatal(err)
	}
	// GET /event can lag a moment behind the send on Dendrite.
	var seen *event.Event
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		seen, err = human.Client.GetEvent(ctx, roomID, reply)
		return err == nil, fmt.Sprintf("get reply: %v", err)
	})
	_ = seen.Content.ParseRaw(seen.Type)
	msg := seen.Content.AsMessage()
	rel := msg.RelatesTo
	if rel == nil || rel.Type != event.RelThread || rel.EventID != root.EventID || !rel.IsFallingBack || rel.GetReplyTo() != root.EventID {
		t.Errorf("thread relation = %+v", rel)
	}
	if msg.FormattedBody != "<strong>first</strong> answer" || msg.Body != "**first** answer" {
		t.Errorf("body %q formatted %q", msg.Body, msg.FormattedBody)
	}
	if !msg.Mentions.Has(human.UserID) {
		t.Errorf("mentions = %+v", msg.Mentions)
	}

	// /relations is served from Dendrite's sync API, which learns about
	// new events asynchronously.
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		latest, err = bot.LatestThreadEvent(ctx, roomID, root.EventID)
		return err == nil && latest == reply, fmt.Sprintf("latest thread event = %s, %v; want the reply %s", latest, err, reply)
	})

	edit, err := bot.Edit(ctx, roomID, reply, "final answer", matrixio.SendOptions{TxnKey: matrixio.TxnKey(root.EventID, "edit/1")})
	if err != nil {
		t.Fatal(err)
	}
	var seenEdit *event.Event
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		seenEdit, err = human.Client.GetEvent(ctx, roomID, edit)
		return err == nil, fmt.Sprintf("get edit: %v", err)
	})
	_ = seenEdit.Content.ParseRaw(seenEdit.Type)
	em := seenEdit.Content.AsMessage()
	if em.RelatesTo.GetReplaceID() != reply || em.NewContent == nil || em.NewContent.Body != "final answer" {
		t.Errorf("edit as seen by the human = %+v (new content %+v)", em.RelatesTo, em.NewContent)
	}

	// The other user's own /sync shows both.
	seenBySync(t, human.Client, roomID, reply, edit)

	react, err := bot.React(ctx, roomID, root.EventID, "👀")
	if err != nil {
		t.Fatal(err)
	}
	var seenReact *event.Event
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		seenReact, err = human.Client.GetEvent(ctx, roomID, react)
		return err == nil, fmt.Sprintf("get reaction: %v", err)
	})
	if seenReact.Type != event.EventReaction {
		t.Errorf("reaction = %+v, %v", seenReact, err)
	}
	if _, err := bot.Redact(ctx, roomID, react, "changed my mind"); err != nil {
		t.Fatal(err)
	}
	if err := bot.MarkRead(ctx, roomID, root.EventID); err != nil {
		t.Error(err)
	}
	if err := bot.SetTyping(ctx, roomID, true, 5*time.Second); err != nil {
		t.Error(err)
	}
	if err := bot.SetTyping(ctx, roomID, false, 0); err != nil {
		t.Error(err)
	}
}

// TestTxnIdempotency: sending twice with the same key gives one event, also
// from a restarted process on the same device.
func TestTxnIdempotency(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	dbPath := openDB(t)
	spec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key := matrixio.TxnKey("$source:example.org", "reply")

	first, err := bot.SendText(ctx, roomID, "once", matrixio.SendOptions{TxnKey: key})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		send func(*matrixio.Account) (id.EventID, error)
		same bool
	}{
		{name: "same key", same: true, send: func(a *matrixio.Account) (id.EventID, error) {
			return a.SendText(ctx, roomID, "once", matrixio.SendOptions{TxnKey: key})
		}},
		{name: "same key after restart", same: true, send: func(*matrixio.Account) (id.EventID, error) {
			restarted := ensure(t, newManager(t, testConfig(srv), reopenDB(t, dbPath)), spec)
			return restarted.SendText(ctx, roomID, "once", matrixio.SendOptions{TxnKey: key})
		}},
		{name: "other stage", send: func(a *matrixio.Account) (id.EventID, error) {
			return a.SendText(ctx, roomID, "once", matrixio.SendOptions{TxnKey: matrixio.TxnKey("$source:example.org", "edit/1")})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.send(bot)
			if err != nil {
				t.Fatal(err)
			}
			if (got == first) != tt.same {
				t.Errorf("event %s vs first %s, want same=%v", got, first, tt.same)
			}
		})
	}

	r1, err := bot.React(ctx, roomID, first, "👍")
	if err != nil {
		t.Fatal(err)
	}
	if r2, err := bot.React(ctx, roomID, first, "👍"); err != nil || r2 != r1 {
		t.Errorf("second identical reaction = %s, %v; want %s", r2, err, r1)
	}

	countOnce := func() int {
		resp, err := bot.Client().Messages(ctx, roomID, "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		count := 0
		for _, evt := range resp.Chunk {
			if evt.Type == event.EventMessage {
				_ = evt.Content.ParseRaw(evt.Type)
				if evt.Content.AsMessage().Body == "once" {
					count++
				}
			}
		}
		return count
	}
	// The keyed send (deduplicated) and the "other stage" send; /messages
	// may lag behind sends, so wait for them, then make sure no third shows.
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		n := countOnce()
		return n >= 2, fmt.Sprintf("room holds %d 'once' messages, want 2", n)
	})
	// Barrier: a later message; once /messages shows it, it shows every
	// send before it.
	bar, err := bot.SendText(ctx, roomID, "barrier", matrixio.SendOptions{TxnKey: matrixio.TxnKey("$barrier", "barrier")})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		resp, err := bot.Client().Messages(ctx, roomID, "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			return false, err.Error()
		}
		for _, evt := range resp.Chunk {
			if evt.ID == bar {
				return true, ""
			}
		}
		return false, "the barrier message is not in /messages yet"
	})
	if n := countOnce(); n != 2 {
		t.Errorf("room holds %d 'once' messages, want 2", n)
	}
}

// TestStateMembersAndSpaces covers the room-state and admin facade.
func TestStateMembersAndSpaces(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	m := newManager(t, testConfig(srv), reopenDB(t, openDB(t)))
	router := ensure(t, m, matrixio.AccountSpec{Localpart: unique(t, "router")})
	agent := ensure(t, m, matrixio.AccountSpec{Localpart: unique(t, "agent")})
	human := srv.RegisterUser(t, unique(t, "human"))

	roomID, err := router.CreateRoom(ctx, matrixio.CreateRoomOptions{
		Name: "stateful", Invite: []id.UserID{agent.UserID(), human.UserID},
		PowerUsers: map[id.UserID]int{agent.UserID(): 50},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Join(ctx, roomID.String()); err != nil {
		t.Fatal(err)
	}

	var pl event.PowerLevelsEventContent
	if err := router.GetState(ctx, roomID, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	if pl.GetUserLevel(agent.UserID()) != 50 || pl.GetUserLevel(router.UserID()) != 100 {
		t.Errorf("power levels: agent %d router %d", pl.GetUserLevel(agent.UserID()), pl.GetUserLevel(router.UserID()))
	}

	cfgType := event.Type{Type: "io.hookroom.test.config", Class: event.StateEventType}
	for _, key := range []string{"", "alpha", "beta"} {
		if _, err := agent.PutState(ctx, roomID, cfgType, key, map[string]any{"key": key}); err != nil {
			t.Fatalf("PutState %q: %v", key, err)
		}
	}
	var one map[string]any
	if err := router.GetState(ctx, roomID, cfgType, "alpha", &one); err != nil || one["key"] != "alpha" {
		t.Errorf("GetState alpha = %v, %v", one, err)
	}
	if err := router.GetState(ctx, roomID, cfgType, "gamma", &one); !errors.Is(err, matrixio.ErrNotFound) {
		t.Errorf("GetState of unset key error = %v, want ErrNotFound", err)
	}
	all, err := router.GetStateEvents(ctx, roomID, cfgType)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["beta"] == nil || all["beta"].Content.Raw["key"] != "beta" {
		t.Errorf("GetStateEvents = %v", all)
	}

	joined, err := router.JoinedMembers(ctx, roomID)
	if err != nil {
		t.Fatal(err)
	}
	if len(joined) != 2 {
		t.Errorf("joined = %v, want router and agent", joined)
	}
	// /members is served from Dendrite's sync API, which may lag a little.
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		members, err := router.Members(ctx, roomID)
		if err != nil {
			return false, err.Error()
		}
		memberships := map[id.UserID]event.Membership{}
		for _, evt := range members {
			memberships[id.UserID(evt.GetStateKey())] = evt.Content.AsMember().Membership
		}
		return memberships[human.UserID] == event.MembershipInvite && memberships[agent.UserID()] == event.MembershipJoin,
			fmt.Sprintf("memberships = %v", memberships)
	})
	// Inviting someone already invited or joined is a no-op success.
	if err := router.Invite(ctx, roomID, human.UserID); err != nil {
		t.Errorf("re-invite: %v", err)
	}
	if err := router.Invite(ctx, roomID, agent.UserID()); err != nil {
		t.Errorf("invite of a joined member: %v", err)
	}

	space, err := router.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "hq", Space: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := router.AddToSpace(ctx, space, roomID); err != nil {
		t.Fatal(err)
	}
	var child event.SpaceChildEventContent
	if err := router.GetState(ctx, space, event.StateSpaceChild, roomID.String(), &child); err != nil || len(child.Via) == 0 {
		t.Errorf("space child = %+v, %v", child, err)
	}
	var parent event.SpaceParentEventContent
	if err := router.GetState(ctx, roomID, event.StateSpaceParent, space.String(), &parent); err != nil || !parent.Canonical {
		t.Errorf("space parent = %+v, %v", parent, err)
	}

	if err := agent.Leave(ctx, roomID); err != nil {
		t.Fatal(err)
	}
	if ms, err := router.Membership(ctx, roomID, agent.UserID()); err != nil || ms != event.MembershipLeave {
		t.Errorf("agent membership after leave = %q, %v", ms, err)
	}
}

// TestLogsNoSecrets runs account creation with debug logging into a buffer
// and checks that no password, token or secret shows up.
func TestLogsNoSecrets(t *testing.T) {
	srv := hstest.Shared(t)
	var buf syncBuffer
	log := zerologTo(&buf)
	ctx := log.WithContext(t.Context())
	dbPath := openDB(t)
	store := reopenDB(t, dbPath)
	m, err := matrixio.NewManager(testConfig(srv), store)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	acct, err := m.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: unique(t, "quiet"), DisplayName: "Quiet"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acct.Client().Logout(ctx); err != nil { // force a password login next time
		t.Fatal(err)
	}
	m2, err := matrixio.NewManager(testConfig(srv), reopenDB(t, dbPath))
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	acct, err = m2.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: acct.UserID().Localpart()})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, "Registered account") || !strings.Contains(out, "Logged in") {
		t.Fatalf("expected debug logs of registration and login, got:\n%s", out)
	}
	secrets := map[string]string{
		"shared secret":      srv.Secret,
		"access token":       acct.Client().AccessToken,
		"generated password": storedPassword(t, dbPath, acct.UserID()),
	}
	for what, s := range secrets {
		if s != "" && strings.Contains(out, s) {
			t.Errorf("log contains the %s", what)
		}
	}
	if regexp.MustCompile(`"password"\s*:`).MatchString(out) {
		t.Errorf("log contains a password field:\n%s", out)
	}
}

type syncBuffer = testkit.Buffer

func zerologTo(w *syncBuffer) zerolog.Logger {
	return zerolog.New(w).Level(zerolog.TraceLevel)
}

// storedPassword reads the generated password straight from the database.
func storedPassword(t testing.TB, dbPath string, user id.UserID) string {
	t.Helper()
	raw, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var pw string
	if err := raw.QueryRow("SELECT password FROM matrixio_account WHERE user_id=?", user.String()).Scan(&pw); err != nil {
		t.Fatal(err)
	}
	return pw
}

// TestRateLimitedHomeserver runs against a Dendrite with its client rate
// limiting on (5 requests, then 429 M_LIMIT_EXCEEDED with retry_after_ms
// 500): account set-up and a burst of typing notices and joins succeed
// because every 429 is waited out.
func TestRateLimitedHomeserver(t *testing.T) {
	t.Setenv("DENDRITE_RATE_LIMITING", "on")
	srv := hstest.Start(t)
	ctx := t.Context()
	var logs syncBuffer
	ctx = zerologTo(&logs).WithContext(ctx)
	m := newManager(t, testConfig(srv), reopenDB(t, openDB(t)))
	router, err := m.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: unique(t, "router"), DisplayName: "Router"})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := m.EnsureAccount(ctx, matrixio.AccountSpec{Localpart: unique(t, "agent"), DisplayName: "Agent"})
	if err != nil {
		t.Fatal(err)
	}
	roomID, err := router.EnsureRoom(ctx, matrixio.RoomSpec{Alias: id.RoomAlias("#" + unique(t, "busy") + ":" + srv.ServerName)}, []*matrixio.Account{router, agent})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const n = 20
	for i := range n {
		if err := agent.SetTyping(ctx, roomID, true, 30*time.Second); err != nil {
			t.Fatalf("typing %d: %v", i, err)
		}
	}
	elapsed := time.Since(start)
	limited := 0
	for _, line := range strings.Split(logs.String(), "\n") {
		if !strings.Contains(line, `"request":"typing"`) || !strings.Contains(line, "M_LIMIT_EXCEEDED") {
			continue
		}
		limited++
		if !strings.Contains(line, `"retry_in":500`) {
			t.Errorf("retry did not wait the server's retry_after_ms (500): %s", line)
		}
	}
	if limited == 0 {
		t.Fatalf("no typing request was rate limited; is rate limiting on? logs:\n%s", logs.String())
	}
	if elapsed < time.Duration(limited)*500*time.Millisecond {
		t.Errorf("%d rate-limited retries took only %v: the 500 ms waits were not honoured", limited, elapsed)
	}
	t.Logf("%d typing notices in %v; %d requests were rate limited and retried after retry_after_ms", n, elapsed, limited)
}

// TestSyncSurvivesHomeserverRestart: the sync loop rides out the
// homeserver going away (network errors, retried with back-off) and picks
// up where it was.
func TestSyncSurvivesHomeserverRestart(t *testing.T) {
	srv := hstest.Start(t)
	ctx := t.Context()
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "bot")})
	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{Name: "restart"})
	if err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	stop := run(t, bot, rec)
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })

	srv.Restart(t)
	after, err := bot.SendText(ctx, roomID, "after restart", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 60*time.Second, "the message sent after the restart", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == after })) == 1
	})
	if err := stop(); err != nil {
		t.Errorf("Run returned %v", err)
	}
}

// TestRevokedTokenRecovery: when the access token is revoked, Run stops
// with an error wrapping M_UNKNOWN_TOKEN; EnsureAccount logs in again on the
// same device and a new Run continues where the old one stopped.
func TestRevokedTokenRecovery(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	m := newManager(t, testConfig(srv), reopenDB(t, openDB(t)))
	spec := matrixio.AccountSpec{Localpart: unique(t, "bot")}
	bot := ensure(t, m, spec)
	device := bot.DeviceID()
	roomID, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{})
	if err != nil {
		t.Fatal(err)
	}

	rec := newRecorder()
	done := make(chan error, 1)
	go func() { done <- bot.Run(ctx, rec) }()
	rec.waitFor(t, 30*time.Second, "initial sync", func(b []matrixio.SyncBatch) bool { return len(b) > 0 })
	if err := bot.Run(ctx, rec); !errors.Is(err, matrixio.ErrAlreadyRunning) {
		t.Errorf("second concurrent Run = %v, want ErrAlreadyRunning", err)
	}

	if _, err := bot.Client().Logout(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, mautrix.MUnknownToken) {
			t.Fatalf("Run after logout returned %v, want M_UNKNOWN_TOKEN", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not stop after its token was revoked")
	}

	// Logging out deleted the device and its encryption keys: the account
	// comes back on a new device.
	again := ensure(t, m, spec)
	if again != bot || again.DeviceID() == device {
		t.Errorf("EnsureAccount gave %p device %s, want the same account %p on a new device (not %s)", again, again.DeviceID(), bot, device)
	}
	run(t, bot, rec)
	msg, err := bot.SendText(ctx, roomID, "back", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rec.waitFor(t, 30*time.Second, "a message after recovery", func(b []matrixio.SyncBatch) bool {
		return len(timelineEvents(b, roomID, func(e *event.Event) bool { return e.ID == msg })) == 1
	})
}

// waitMember waits until acct's /members of room shows user joined. Dendrite
// answers /members from its sync API, which learns of a join a moment after
// the join request returns; an account that encrypts for the room before
// then shares its room key with no device of user.
func waitMember(t testing.TB, acct *matrixio.Account, room id.RoomID, user id.UserID) {
	t.Helper()
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		members, err := acct.Members(t.Context(), room)
		if err != nil {
			return false, fmt.Sprintf("members of %s: %v", room, err)
		}
		for _, m := range members {
			if m.GetStateKey() == user.String() && m.Content.AsMember().Membership == event.MembershipJoin {
				return true, ""
			}
		}
		return false, fmt.Sprintf("waiting until %s shows %s joined to %s", acct.UserID(), user, room)
	})
}

// decryptedEvent waits until evID shows in rec's batches of room and returns
// it decrypted: as synced when its room key came first, else through
// m.Decrypt, which waits for the key as hookroom's pipeline does (Dendrite
// may deliver the to-device key a sync response after the message).
func decryptedEvent(t testing.TB, m *matrixio.Manager, rec *recorder, room id.RoomID, evID id.EventID) *event.Event {
	t.Helper()
	var evt *event.Event
	rec.waitFor(t, 30*time.Second, "event "+evID.String(), func(b []matrixio.SyncBatch) bool {
		evs := timelineEvents(b, room, func(e *event.Event) bool { return e.ID == evID })
		if len(evs) > 0 {
			evt = evs[0]
		}
		return evt != nil
	})
	if evt.Type != event.EventEncrypted {
		return evt
	}
	dec, err := m.Decrypt(t.Context(), evt)
	if err != nil {
		t.Fatalf("decrypt %s: %v", evID, err)
	}
	return dec
}
