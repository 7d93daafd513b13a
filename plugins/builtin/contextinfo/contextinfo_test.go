package contextinfo

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins"
)

func newInfo(t *testing.T, js string, now time.Time) *Info {
	t.Helper()
	inst, err := newFromJSON(js)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	info := inst.(*Info)
	info.now = func() time.Time { return now }
	return info
}

func newFromJSON(js string) (plugins.Instance, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return nil, err
	}
	s, err := hooks.NewSettings(m)
	if err != nil {
		return nil, err
	}
	return New(context.Background(), plugins.Env{Name: Name, Settings: s})
}

var summer = time.Date(2026, 9, 8, 12, 3, 0, 0, time.UTC)

func TestDatetimeItems(t *testing.T) {
	tests := []struct {
		name     string
		settings string
		now      time.Time
		want     []hooks.EnrichmentItem
	}{
		{
			name: "berlin summer", settings: `{"timezone":"Europe/Berlin"}`, now: summer,
			want: []hooks.EnrichmentItem{
				{Key: "datetime", Text: "Current date and time: Tuesday, 8 September 2026, 14:03", CachePolicy: hooks.Volatile},
				{Key: "timezone", Text: "Timezone: Europe/Berlin (CEST, UTC+02:00)", CachePolicy: hooks.Stable},
			},
		},
		{
			name: "berlin winter", settings: `{"timezone":"Europe/Berlin"}`, now: time.Date(2026, 1, 31, 23, 30, 0, 0, time.UTC),
			want: []hooks.EnrichmentItem{
				{Key: "datetime", Text: "Current date and time: Sunday, 1 February 2026, 00:30", CachePolicy: hooks.Volatile},
				{Key: "timezone", Text: "Timezone: Europe/Berlin (CET, UTC+01:00)", CachePolicy: hooks.Stable},
			},
		},
		{
			name: "half-hour offset", settings: `{"timezone":"Asia/Kolkata","format":"2006-01-02 15:04"}`, now: summer,
			want: []hooks.EnrichmentItem{
				{Key: "datetime", Text: "Current date and time: 2026-09-08 17:33", CachePolicy: hooks.Volatile},
				{Key: "timezone", Text: "Timezone: Asia/Kolkata (IST, UTC+05:30)", CachePolicy: hooks.Stable},
			},
		},
		{
			name: "zone without an abbreviation", settings: `{"timezone":"America/Sao_Paulo"}`, now: summer,
			want: []hooks.EnrichmentItem{
				{Key: "datetime", Text: "Current date and time: Tuesday, 8 September 2026, 09:03", CachePolicy: hooks.Volatile},
				{Key: "timezone", Text: "Timezone: America/Sao_Paulo (UTC-03:00)", CachePolicy: hooks.Stable},
			},
		},
		{
			name: "transient time, no timezone item", settings: `{"timezone":"UTC","transient":true,"timezone_item":false}`, now: summer,
			want: []hooks.EnrichmentItem{
				{Key: "datetime", Text: "Current date and time: Tuesday, 8 September 2026, 12:03", CachePolicy: hooks.Volatile, Transient: true},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := newInfo(t, tt.settings, tt.now)
			reg := hooktest.Registry(t, []hooks.Plugin{{Name: Name, Hooks: info.Hooks()}})
			c := hooktest.MessageEnrich("what time is it?")
			hooktest.Emit(t, reg, hooks.MessageEnrich, c)
			if !reflect.DeepEqual(c.Items, tt.want) {
				t.Fatalf("items:\n%+v\nwant:\n%+v", c.Items, tt.want)
			}
			if reg.Has(hooks.SystemEnrich.Name()) {
				t.Error("system:enrich hook registered without room_info")
			}
		})
	}
}

func TestDefaultZone(t *testing.T) {
	info := newInfo(t, `{}`, summer)
	if info.loc == nil || info.zone == "" || info.format != DefaultFormat {
		t.Fatalf("defaults: loc=%v zone=%q format=%q", info.loc, info.zone, info.format)
	}
}

func TestInvalidSettings(t *testing.T) {
	tests := []struct{ settings, want string }{
		{`{"timezone":"Mars/Olympus"}`, `settings.timezone: unknown timezone "Mars/Olympus" (want an IANA name such as Europe/Berlin or UTC)`},
		{`{"timezone":"Local"}`, `settings.timezone: unknown timezone "Local" (want an IANA name such as Europe/Berlin or UTC)`},
		{`{"format":"today"}`, `settings.format: "today" has no date or time element (use Go's reference time, e.g. "2006-01-02 15:04")`},
		{`{"format":"%Y-%m-%d"}`, `settings.format: "%Y-%m-%d" has no date or time element (use Go's reference time, e.g. "2006-01-02 15:04")`},
		{`{"tz":"UTC"}`, "settings.tz: unknown setting"},
		{`{"room_info":"yes"}`, "settings.room_info: must be a boolean, not string"},
	}
	for _, tt := range tests {
		_, err := newFromJSON(tt.settings)
		var se *plugins.SettingsError
		if !errors.As(err, &se) || err.Error() != tt.want {
			t.Errorf("%s: error %v\nwant %s", tt.settings, err, tt.want)
		}
	}
}

// failingState is a room state service that is down.
type failingState struct{ hooktest.Services }

func (*failingState) RoomStateEvent(context.Context, id.RoomID, string, string) (json.RawMessage, error) {
	return nil, errors.New("homeserver unreachable")
}

func TestRoomInfo(t *testing.T) {
	now := summer
	info := newInfo(t, `{"timezone":"UTC","room_info":true}`, now)
	info.now = func() time.Time { return now }
	var svc hooktest.Services
	ctx := context.Background()
	svc.PutRoomState(ctx, hooktest.Room, "m.room.name", "", map[string]any{"name": "Lobby"})
	svc.PutRoomState(ctx, hooktest.Room, "m.room.canonical_alias", "", map[string]any{"alias": "#lobby:localhost"})
	svc.PutRoomState(ctx, hooktest.Room, "m.room.topic", "", map[string]any{"topic": "Say\nhello."})
	reg := hooktest.Registry(t, []hooks.Plugin{{Name: Name, Hooks: info.Hooks()}}, hooks.Options{Services: svc.Bind()})
	// add_datetime only reads the clock; add_room_info may call the
	// homeserver and must stay abandonable.
	for _, h := range reg.Hooks() {
		if want := h.Hook == "add_datetime"; h.Inline != want {
			t.Errorf("%s: Inline = %v, want %v", h.Hook, h.Inline, want)
		}
	}

	emit := func() []hooks.EnrichmentItem {
		c := hooktest.SystemEnrich("hi")
		hooktest.Emit(t, reg, hooks.SystemEnrich, c)
		return c.Items
	}
	want := []hooks.EnrichmentItem{{Key: "room", CachePolicy: hooks.Stable,
		Text: `You are "assistant" in the Matrix room "Lobby" (#lobby:localhost, !room:localhost). Room topic: Say hello.`}}
	if got := emit(); !reflect.DeepEqual(got, want) {
		t.Fatalf("items %+v\nwant %+v", got, want)
	}

	// Cached for a minute, then read again.
	svc.PutRoomState(ctx, hooktest.Room, "m.room.name", "", map[string]any{"name": "Renamed"})
	if got := emit(); !reflect.DeepEqual(got, want) {
		t.Errorf("within the TTL: %+v", got)
	}
	now = now.Add(roomInfoTTL + time.Second)
	if got := emit(); len(got) != 1 || got[0].Text != `You are "assistant" in the Matrix room "Renamed" (#lobby:localhost, !room:localhost). Room topic: Say hello.` {
		t.Errorf("after the TTL: %+v", got)
	}

	// Without a state service: the room id only.
	regNoSvc := hooktest.Registry(t, []hooks.Plugin{{Name: Name, Hooks: newInfo(t, `{"room_info":true}`, now).Hooks()}})
	c := hooktest.SystemEnrich("hi")
	hooktest.Emit(t, regNoSvc, hooks.SystemEnrich, c)
	if len(c.Items) != 1 || c.Items[0].Text != `You are "assistant" in the Matrix room !room:localhost.` {
		t.Errorf("without services: %+v", c.Items)
	}

	// A failing homeserver: the hook contributes nothing.
	regFail := hooktest.Registry(t, []hooks.Plugin{{Name: Name, Hooks: newInfo(t, `{"room_info":true}`, now).Hooks()}},
		hooks.Options{Services: hooks.Services{State: &failingState{}}})
	c = hooktest.SystemEnrich("hi")
	hooktest.Emit(t, regFail, hooks.SystemEnrich, c)
	if len(c.Items) != 0 {
		t.Errorf("with a failing state service: %+v", c.Items)
	}
	if st := regFail.Stats(); len(st) != 2 || st[1].Hook != "add_room_info" || st[1].Errors != 1 {
		t.Errorf("stats %+v, want one error", st)
	}
}
