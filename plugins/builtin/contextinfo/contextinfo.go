package contextinfo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // IANA zones even on hosts without a zoneinfo database

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// Name is the plugin's registered name.
const Name = "context_info"

// DefaultFormat is the layout of the datetime item.
const DefaultFormat = "Monday, 2 January 2006, 15:04"

// Item keys.
const (
	KeyDatetime = "datetime"
	KeyTimezone = "timezone"
	KeyRoom     = "room"
)

// roomInfoTTL is how long room state is reused.
const roomInfoTTL = time.Minute

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        Name,
		Description: "Adds the current date, time and timezone to every turn, and optionally the room's name and topic to the system prompt",
		New:         New,
	})
}

type settings struct {
	Timezone     string `json:"timezone"`
	Format       string `json:"format"`
	TimezoneItem *bool  `json:"timezone_item"`
	Transient    bool   `json:"transient"`
	RoomInfo     bool   `json:"room_info"`
}

// Info is a loaded context_info plugin.
type Info struct {
	loc          *time.Location
	zone         string // the zone's display name
	format       string
	timezoneItem bool
	transient    bool
	roomInfo     bool
	now          func() time.Time

	mu    sync.Mutex
	rooms map[id.RoomID]roomEntry
}

type roomEntry struct {
	text    string
	fetched time.Time
}

var _ plugins.Instance = (*Info)(nil)

// New builds the plugin from env's settings.
func New(_ context.Context, env plugins.Env) (plugins.Instance, error) {
	var s settings
	if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
		return nil, err
	}
	info := &Info{
		format: s.Format, timezoneItem: s.TimezoneItem == nil || *s.TimezoneItem,
		transient: s.Transient, roomInfo: s.RoomInfo, now: time.Now,
		rooms: map[id.RoomID]roomEntry{},
	}
	if s.Timezone == "" {
		info.loc, info.zone = localZone()
	} else {
		loc, err := time.LoadLocation(s.Timezone)
		if err != nil || strings.EqualFold(s.Timezone, "local") {
			return nil, plugins.SettingsErrorf("timezone", "unknown timezone %q (want an IANA name such as Europe/Berlin or UTC)", s.Timezone)
		}
		info.loc, info.zone = loc, s.Timezone
	}
	if info.format == "" {
		info.format = DefaultFormat
	} else if ref := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC); ref.Format(info.format) == info.format {
		return nil, plugins.SettingsErrorf("format", "%q has no date or time element (use Go's reference time, e.g. \"2006-01-02 15:04\")", info.format)
	}
	return info, nil
}

// localZone returns the server's local zone and its IANA name when it can
// be found (TZ, /etc/localtime), else its abbreviation.
func localZone() (*time.Location, string) {
	if name := time.Local.String(); name != "Local" && name != "" {
		return time.Local, name
	}
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" {
		if loc, err := time.LoadLocation(tz); err == nil {
			return loc, tz
		}
	}
	if target, err := filepath.EvalSymlinks("/etc/localtime"); err == nil {
		if _, name, ok := strings.Cut(target, "zoneinfo/"); ok {
			if loc, err := time.LoadLocation(name); err == nil {
				return loc, name
			}
		}
	}
	abbr, _ := time.Now().Zone()
	return time.Local, abbr
}

// Hooks returns add_datetime, and add_room_info when room_info is on.
// add_datetime only reads the clock and runs Inline; add_room_info may
// fetch room state from the homeserver and runs on a worker.
func (i *Info) Hooks() []hooks.Hook {
	hs := []hooks.Hook{hooks.Handle(hooks.MessageEnrich, "add_datetime", i.enrich, hooks.Inline())}
	if i.roomInfo {
		hs = append(hs, hooks.Handle(hooks.SystemEnrich, "add_room_info", i.systemEnrich))
	}
	return hs
}

func (i *Info) enrich(_ context.Context, c *hooks.MessageEnrichContext) error {
	now := i.now().In(i.loc)
	var flags []hooks.ItemFlag
	if i.transient {
		flags = append(flags, hooks.TransientItem)
	}
	c.AddMetadata(KeyDatetime, "Current date and time: "+now.Format(i.format), flags...)
	if i.timezoneItem {
		abbr, offset := now.Zone()
		zone := i.zone
		if abbr != "" && abbr != zone && !strings.HasPrefix(abbr, "+") && !strings.HasPrefix(abbr, "-") {
			zone += " (" + abbr + ", " + utcOffset(offset) + ")"
		} else {
			zone += " (" + utcOffset(offset) + ")"
		}
		c.AddMetadata(KeyTimezone, "Timezone: "+zone, hooks.StableItem)
	}
	return nil
}

func utcOffset(seconds int) string {
	sign := '+'
	if seconds < 0 {
		sign, seconds = '-', -seconds
	}
	return fmt.Sprintf("UTC%c%02d:%02d", sign, seconds/3600, seconds%3600/60)
}

func (i *Info) systemEnrich(ctx context.Context, c *hooks.SystemEnrichContext) error {
	room := c.Envelope.RoomID
	if room == "" {
		return nil
	}
	desc, err := i.describeRoom(ctx, &c.Base, room)
	if err != nil {
		return err
	}
	var b strings.Builder
	if c.TargetAgent != "" {
		fmt.Fprintf(&b, "You are %q in the Matrix room ", string(c.TargetAgent))
	} else {
		b.WriteString("This conversation is in the Matrix room ")
	}
	b.WriteString(desc)
	c.AddInstruction(KeyRoom, b.String(), hooks.StableItem)
	return nil
}

// describeRoom returns `"Name" (#alias, !id). Room topic: …` from room
// state, cached for roomInfoTTL.
func (i *Info) describeRoom(ctx context.Context, b *hooks.Base, room id.RoomID) (string, error) {
	now := i.now()
	i.mu.Lock()
	e, ok := i.rooms[room]
	i.mu.Unlock()
	if ok && now.Sub(e.fetched) < roomInfoTTL {
		return e.text, nil
	}
	get := func(eventType, field string) (string, error) {
		raw, err := b.RoomStateEvent(ctx, room, eventType, "")
		if err != nil {
			if errors.Is(err, hooks.ErrNotFound) {
				return "", nil
			}
			return "", err
		}
		var content map[string]any
		if err := json.Unmarshal(raw, &content); err != nil {
			return "", nil
		}
		s, _ := content[field].(string)
		return strings.TrimSpace(s), nil
	}
	var name, alias, topic string
	var err error
	if name, err = get("m.room.name", "name"); err == nil {
		if alias, err = get("m.room.canonical_alias", "alias"); err == nil {
			topic, err = get("m.room.topic", "topic")
		}
	}
	if errors.Is(err, hooks.ErrNoService) {
		return string(room) + ".", nil
	}
	if err != nil {
		return "", fmt.Errorf("failed to read room state of %s: %w", room, err)
	}
	var text strings.Builder
	if name != "" {
		fmt.Fprintf(&text, "%q (", name)
		if alias != "" {
			text.WriteString(alias + ", ")
		}
		text.WriteString(string(room) + ").")
	} else {
		if alias != "" {
			text.WriteString(alias + " (" + string(room) + ").")
		} else {
			text.WriteString(string(room) + ".")
		}
	}
	if topic != "" {
		text.WriteString(" Room topic: " + strings.Join(strings.Fields(topic), " "))
	}
	i.mu.Lock()
	i.rooms[room] = roomEntry{text: text.String(), fetched: now}
	i.mu.Unlock()
	return text.String(), nil
}
