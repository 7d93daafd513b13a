package tracking

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/dbtest"
)

// redactionEvent builds an m.room.redaction as a sync delivers it. topLevel
// puts the target in the top-level "redacts" (room versions up to 10),
// inContent in the content (room version 11); a homeserver may set both.
func redactionEvent(t testing.TB, room id.RoomID, eventID, target id.EventID, topLevel, inContent bool) *event.Event {
	t.Helper()
	content := `{"reason":"oops"}`
	if inContent {
		content = fmt.Sprintf(`{"reason":"oops","redacts":%q}`, target)
	}
	top := ""
	if topLevel {
		top = fmt.Sprintf(`"redacts":%q,`, target)
	}
	raw := fmt.Sprintf(`{"event_id":%q,"room_id":%q,"sender":"@alice:localhost","type":"m.room.redaction",%s`+
		`"origin_server_ts":1700000000002,"content":%s}`, eventID, room, top, content)
	var ev event.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		t.Fatal(err)
	}
	ev.Type.Class = event.MessageEventType
	_ = ev.Content.ParseRaw(ev.Type)
	return &ev
}

func TestRedactionTarget(t *testing.T) {
	tests := []struct {
		name                string
		topLevel, inContent bool
		want                id.EventID
	}{
		{"top level (room v1-v10)", true, false, "$target"},
		{"in content (room v11)", false, true, "$target"},
		{"both", true, true, "$target"},
		{"neither", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := redactionEvent(t, roomA, "$r", "$target", tt.topLevel, tt.inContent)
			if got := RedactionTarget(ev); got != tt.want {
				t.Errorf("RedactionTarget = %q, want %q", got, tt.want)
			}
		})
	}
	if got := RedactionTarget(syncEvent(t, roomA, "$m", "x")); got != "" {
		t.Errorf("RedactionTarget of a message = %q", got)
	}
}

// A redaction recorded in the inbox blanks the content of the event it
// redacts, keeps its row (dedup) and its state, and a replay sees it
// redacted.
func TestRedactionBlanksInboxContent(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		const secret = "my password is hunter2"
		tests := []struct {
			name string
			// record records the target ($m in roomA) and the redaction.
			record func(t *testing.T, s *Store, msg, red *event.Event)
			// handled marks the target handled before the redaction.
			handled     bool
			room        id.RoomID // the redaction's room
			wantBlanked bool
		}{
			{name: "separate batches", record: func(t *testing.T, s *Store, msg, red *event.Event) {
				mustBatch(t, s, msg)
				mustBatch(t, s, red)
			}, room: roomA, wantBlanked: true},
			{name: "same batch", record: func(t *testing.T, s *Store, msg, red *event.Event) {
				mustBatch(t, s, msg, red)
			}, room: roomA, wantBlanked: true},
			{name: "single Record", record: func(t *testing.T, s *Store, msg, red *event.Event) {
				mustBatch(t, s, msg)
				if isNew, err := s.Record(ctx, red, agent); err != nil || !isNew {
					t.Fatalf("Record of the redaction = %v, %v", isNew, err)
				}
			}, room: roomA, wantBlanked: true},
			{name: "already handled", record: func(t *testing.T, s *Store, msg, red *event.Event) {
				mustBatch(t, s, msg)
				if err := s.MarkHandled(ctx, msg.ID); err != nil {
					t.Fatal(err)
				}
				mustBatch(t, s, red)
			}, handled: true, room: roomA, wantBlanked: true},
			{name: "another room's redaction does nothing", record: func(t *testing.T, s *Store, msg, red *event.Event) {
				mustBatch(t, s, msg, red)
			}, room: roomB, wantBlanked: false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "hookroom.db")
				s, db := openStore(t, d, path)
				msg := syncEvent(t, roomA, "$m", secret)
				red := redactionEvent(t, tt.room, "$r", "$m", true, false)
				tt.record(t, s, msg, red)
				var raw string
				if err := db.QueryRow(ctx, `SELECT raw FROM tracking_inbox WHERE event_id = '$m'`).Scan(&raw); err != nil {
					t.Fatal(err)
				}
				if got := strings.Contains(raw, "hunter2"); got == tt.wantBlanked {
					t.Errorf("stored content still holds the text: %v, want blanked %v (raw %s)", got, tt.wantBlanked, raw)
				}
				// Seen again, the target is not new.
				if isNew, err := s.Record(ctx, syncEvent(t, roomA, "$m", secret), router); err != nil || isNew {
					t.Errorf("Record of the redacted event again = %v, %v; want known", isNew, err)
				}
				pending, err := s.Pending(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got *event.Event
				for _, ev := range pending {
					if ev.ID == "$m" {
						got = ev
					}
				}
				switch {
				case tt.handled && got != nil:
					t.Fatal("a handled event came back as pending after its redaction")
				case tt.handled:
					return
				case got == nil:
					t.Fatalf("pending = %v, want $m still there", ids(pending))
				}
				redacted := got.Unsigned.RedactedBecause != nil
				if redacted != tt.wantBlanked {
					t.Fatalf("replayed RedactedBecause set = %v, want %v", redacted, tt.wantBlanked)
				}
				if redacted {
					if got.Unsigned.RedactedBecause.ID != "$r" || got.Content.AsMessage().Body != "" || got.Sender != alice || got.Type != event.EventMessage {
						t.Errorf("replayed redacted event = %+v, content %s", got, got.Content.VeryRaw)
					}
					// Applying it again changes nothing.
					if again, err := s.Redact(ctx, red); err != nil || again {
						t.Errorf("Redact again = %v, %v; want false", again, err)
					}
				}
			})
		}
	})
}

// A message whose content does not parse (a body that is a number, an
// object) is kept and replayed; it must not stop the replay of the others.
func TestPendingKeepsMalformedContent(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		s := newStore(t, d)
		var evs []*event.Event
		for i, content := range []string{
			`{"msgtype":"m.text","body":42}`,
			`{"msgtype":"m.text","body":{"not":"text"}}`,
			`{"msgtype":5,"body":"x"}`,
			`{"msgtype":"m.text","body":"fine"}`,
		} {
			raw := fmt.Sprintf(`{"event_id":"$%d","room_id":%q,"sender":"@alice:localhost","type":"m.room.message","origin_server_ts":1,"content":%s}`, i, roomA, content)
			var ev event.Event
			if err := json.Unmarshal([]byte(raw), &ev); err != nil {
				t.Fatal(err)
			}
			ev.Type.Class = event.MessageEventType
			_ = ev.Content.ParseRaw(ev.Type)
			evs = append(evs, &ev)
		}
		mustBatch(t, s, evs...)
		pending, err := s.Pending(ctx)
		if err != nil {
			t.Fatalf("Pending with malformed events: %v", err)
		}
		if len(pending) != 4 || pending[3].Content.AsMessage().Body != "fine" {
			t.Errorf("pending = %v", ids(pending))
		}
		if string(pending[0].Content.VeryRaw) != string(evs[0].Content.VeryRaw) {
			t.Errorf("malformed content replayed as %s", pending[0].Content.VeryRaw)
		}
	})
}

func mustBatch(t *testing.T, s *Store, evs ...*event.Event) {
	t.Helper()
	if _, err := s.RecordBatch(context.Background(), router, evs); err != nil {
		t.Fatal(err)
	}
}
