package matrixio

import (
	"encoding/json"
	"fmt"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// A sync response as a homeserver sends it, decoded with mautrix's own
// types. Only the conversion into a SyncBatch is under test here; the loop
// itself is tested against Dendrite.
const syncFixture = `{
  "next_batch": "s2",
  "rooms": {
    "join": {
      "!b:x": {
        "state": {"events": [
          {"type": "m.room.member", "state_key": "@alice:x", "sender": "@alice:x", "event_id": "$m1", "origin_server_ts": 1, "content": {"membership": "join"}}
        ]},
        "timeline": {"events": [
          {"type": "m.room.message", "sender": "@alice:x", "event_id": "$t1", "origin_server_ts": 2, "content": {"msgtype": "m.text", "body": "hi"}},
          {"type": "m.reaction", "sender": "@alice:x", "event_id": "$t2", "origin_server_ts": 3, "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$t1", "key": "👍"}}},
          {"type": "m.room.message", "sender": "@alice:x", "event_id": "$t3", "origin_server_ts": 4, "content": {"msgtype": 42}},
          {"type": "com.example.custom", "sender": "@alice:x", "event_id": "$t4", "origin_server_ts": 5, "content": {"x": 1}}
        ], "limited": false}
      },
      "!a:x": {
        "timeline": {"events": [
          {"type": "m.room.member", "state_key": "@bob:x", "sender": "@bob:x", "event_id": "$j1", "origin_server_ts": 6, "content": {"membership": "join"}}
        ]}
      },
      "!empty:x": {"timeline": {"events": []}}
    },
    "leave": {
      "!gone:x": {"timeline": {"events": [
        {"type": "m.room.member", "state_key": "@bot:x", "sender": "@mod:x", "event_id": "$k1", "origin_server_ts": 7, "content": {"membership": "leave"}}
      ]}}
    },
    "invite": {
      "!inv:x": {"invite_state": {"events": [
        {"type": "m.room.name", "state_key": "", "sender": "@carol:x", "content": {"name": "Secret"}},
        {"type": "m.room.member", "state_key": "@bot:x", "sender": "@carol:x", "content": {"membership": "invite"}}
      ]}}
    }
  }
}`

func TestBuildBatch(t *testing.T) {
	tests := []struct {
		name  string
		since string
	}{
		{name: "initial", since: ""},
		{name: "incremental", since: "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var resp mautrix.RespSync
			if err := json.Unmarshal([]byte(syncFixture), &resp); err != nil {
				t.Fatal(err)
			}
			acct := newTestAccount(t, "http://homeserver.invalid")
			acct.userID = "@bot:x"
			b := acct.buildBatch(t.Context(), &resp, tt.since, nil)

			if b.Initial != (tt.since == "") || b.Since != tt.since || b.NextBatch != "s2" {
				t.Errorf("batch header = initial %v since %q next %q", b.Initial, b.Since, b.NextBatch)
			}
			var rooms []string
			for _, r := range b.Rooms {
				rooms = append(rooms, fmt.Sprintf("%s/%s/%d+%d", r.RoomID, r.Membership, len(r.State), len(r.Timeline)))
			}
			if got, want := fmt.Sprint(rooms), "[!a:x/join/0+1 !b:x/join/1+4 !gone:x/leave/0+1]"; got != want {
				t.Errorf("rooms = %s, want %s (sorted, empty rooms dropped)", got, want)
			}
			for _, r := range b.Rooms {
				for _, evt := range append(append([]*event.Event{}, r.State...), r.Timeline...) {
					if evt.RoomID != r.RoomID {
						t.Errorf("%s: room id %q, want %q", evt.ID, evt.RoomID, r.RoomID)
					}
					wantClass := event.MessageEventType
					if evt.StateKey != nil {
						wantClass = event.StateEventType
					}
					if evt.Type.Class != wantClass {
						t.Errorf("%s: class %v, want %v", evt.ID, evt.Type.Class, wantClass)
					}
				}
			}
			tl := b.Rooms[1].Timeline
			if msg := tl[0].Content.AsMessage(); msg.Body != "hi" {
				t.Errorf("message not parsed: %+v", tl[0].Content.Parsed)
			}
			if rel := tl[1].Content.AsReaction().RelatesTo; rel.Key != "👍" || rel.EventID != "$t1" {
				t.Errorf("reaction not parsed: %+v", rel)
			}
			if tl[2].ID != "$t3" || tl[3].ID != "$t4" {
				t.Errorf("malformed or unknown events were dropped: %v %v", tl[2].ID, tl[3].ID)
			}
			if len(b.Invites) != 1 {
				t.Fatalf("invites = %+v", b.Invites)
			}
			inv := b.Invites[0]
			if inv.RoomID != "!inv:x" || inv.Sender != "@carol:x" || inv.Event == nil || len(inv.State) != 1 {
				t.Errorf("invite = %+v", inv)
			}
			if inv.State[0].Content.AsRoomName().Name != "Secret" {
				t.Errorf("invite state not parsed: %+v", inv.State[0].Content.Parsed)
			}
		})
	}
}

func TestSyncBatchEmpty(t *testing.T) {
	tests := []struct {
		name  string
		batch SyncBatch
		empty bool
	}{
		{name: "nothing", batch: SyncBatch{}, empty: true},
		{name: "initial but nothing", batch: SyncBatch{Initial: true}, empty: true},
		{name: "a room", batch: SyncBatch{Rooms: []RoomEvents{{RoomID: "!r"}}}},
		{name: "an invite", batch: SyncBatch{Invites: []Invite{{RoomID: "!r"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.batch.Empty(); got != tt.empty {
				t.Errorf("Empty() = %v, want %v", got, tt.empty)
			}
		})
	}
}

func TestRecentSet(t *testing.T) {
	s := newRecentSet(3)
	for _, e := range []id.EventID{"$1", "$2", "$3", "$2", "$4"} {
		s.add(e)
	}
	tests := []struct {
		evt  id.EventID
		want bool
	}{
		{"$1", false}, // evicted: oldest of four distinct ids
		{"$2", true},
		{"$3", true},
		{"$4", true},
		{"$5", false},
	}
	for _, tt := range tests {
		if got := s.has(tt.evt); got != tt.want {
			t.Errorf("has(%s) = %v, want %v", tt.evt, got, tt.want)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr bool
	}{
		{name: "minimal", cfg: Config{HomeserverURL: "http://127.0.0.1:8008", ServerName: "localhost"}},
		{name: "no url", cfg: Config{ServerName: "localhost"}, wantErr: true},
		{name: "bad url", cfg: Config{HomeserverURL: "ftp://x", ServerName: "localhost"}, wantErr: true},
		{name: "no server name", cfg: Config{HomeserverURL: "http://127.0.0.1:8008"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.cfg.withDefaults()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got.TimelineLimit != 1000 || got.BackfillLimit != 10000 || got.SyncTimeout.Seconds() != 30 ||
				got.Retry.MaxAttempts != 8 || got.HTTPClient == nil || got.DeviceDisplayName != "hookroom" {
				t.Errorf("defaults not applied: %+v", got)
			}
		})
	}
}

func TestRegistrationStringHidesSecrets(t *testing.T) {
	tests := []struct {
		reg  Registration
		want string
	}{
		{Registration{SharedSecret: "s3cr3t", Token: "t0k3n"}, "shared-secret"},
		{Registration{Token: "t0k3n"}, "registration-token"},
		{Registration{}, "none"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(tt.reg); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestNextStage(t *testing.T) {
	const tok mautrix.AuthType = "m.login.registration_token"
	tests := []struct {
		name string
		uia  mautrix.RespUserInteractive
		want mautrix.AuthType
		ok   bool
	}{
		{name: "token only", uia: mautrix.RespUserInteractive{Flows: []mautrix.UIAFlow{{Stages: []mautrix.AuthType{tok}}}}, want: tok, ok: true},
		{name: "token then dummy, token done", uia: mautrix.RespUserInteractive{
			Flows:     []mautrix.UIAFlow{{Stages: []mautrix.AuthType{tok, mautrix.AuthTypeDummy}}},
			Completed: []string{string(tok)},
		}, want: mautrix.AuthTypeDummy, ok: true},
		{name: "skips flows with other stages", uia: mautrix.RespUserInteractive{Flows: []mautrix.UIAFlow{
			{Stages: []mautrix.AuthType{mautrix.AuthTypeEmail, tok}},
			{Stages: []mautrix.AuthType{tok}},
		}}, want: tok, ok: true},
		{name: "no token flow", uia: mautrix.RespUserInteractive{Flows: []mautrix.UIAFlow{{Stages: []mautrix.AuthType{mautrix.AuthTypeDummy}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := nextStage(&tt.uia, tok)
			if got != tt.want || ok != tt.ok {
				t.Errorf("nextStage = %q, %v; want %q, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// A limited timeline needs filling unless the account's own join is in it
// (a fresh join: everything after it is there, before it is history).
func TestNeedsFill(t *testing.T) {
	const self = id.UserID("@bot:x")
	ev := func(raw string) *event.Event {
		var evt event.Event
		if err := json.Unmarshal([]byte(raw), &evt); err != nil {
			t.Fatal(err)
		}
		return &evt
	}
	msg := ev(`{"type":"m.room.message","sender":"@a:x","event_id":"$m","content":{"body":"hi"}}`)
	join := ev(`{"type":"m.room.member","state_key":"@bot:x","sender":"@bot:x","event_id":"$j","content":{"membership":"join"},"unsigned":{"prev_content":{"membership":"invite"}}}`)
	rename := ev(`{"type":"m.room.member","state_key":"@bot:x","sender":"@bot:x","event_id":"$r","content":{"membership":"join","displayname":"B"},"unsigned":{"prev_content":{"membership":"join"}}}`)
	otherJoin := ev(`{"type":"m.room.member","state_key":"@a:x","sender":"@a:x","event_id":"$o","content":{"membership":"join"}}`)
	for _, tt := range []struct {
		name    string
		limited bool
		events  []*event.Event
		want    bool
	}{
		{"not limited", false, []*event.Event{msg}, false},
		{"limited", true, []*event.Event{msg}, true},
		{"limited, fresh own join", true, []*event.Event{join, msg}, false},
		{"limited, own profile change", true, []*event.Event{rename, msg}, true},
		{"limited, someone else joined", true, []*event.Event{otherJoin, msg}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tl := mautrix.SyncTimeline{SyncEventsList: mautrix.SyncEventsList{Events: tt.events}, Limited: tt.limited}
			if got := needsFill(tl, self); got != tt.want {
				t.Errorf("needsFill = %v, want %v", got, tt.want)
			}
		})
	}
}
