package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // current_time must know every IANA zone, also in minimal containers

	"maunium.net/go/mautrix/id"
)

// Names of the built-in tools.
const (
	ToolCurrentTime = "current_time"
	ToolRoomInfo    = "room_info"
	ToolSchedule    = "schedule"
)

// BuiltinTools returns the spec of every built-in tool, in the order they
// are documented (config.example.yaml lists them under agents.<name>.tools).
// The bot builds them by name: RoomInfoTool needs its room lookup.
func BuiltinTools() []ToolSpec {
	return []ToolSpec{CurrentTime{}.Spec(), RoomInfoTool(nil).Spec(), ScheduleTool(nil).Spec()}
}

// CurrentTime is the current_time tool: it tells the model the date and
// time, in the time zone the model asks for or in Zone. Its zero value
// answers in UTC from the system clock.
type CurrentTime struct {
	// Zone is the default time zone (nil: UTC).
	Zone *time.Location
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

var _ Tool = CurrentTime{}

// Spec describes current_time.
func (t CurrentTime) Spec() ToolSpec {
	def := "UTC"
	if t.Zone != nil {
		def = t.Zone.String()
	}
	return ToolSpec{
		Name:        ToolCurrentTime,
		Description: "Get the current date and time. Optionally in a given IANA time zone (default " + def + ").",
		Parameters: json.RawMessage(`{"type":"object","properties":{"timezone":{"type":"string",` +
			`"description":"IANA time zone name, e.g. Europe/Berlin or America/New_York"}},"additionalProperties":false}`),
	}
}

// LoadZone returns the IANA time zone called name. Unlike time.LoadLocation
// it refuses "" and "Local" (which depend on the server) and explains what a
// valid name looks like.
func LoadZone(name string) (*time.Location, error) {
	name = strings.TrimSpace(name)
	if name == "" || strings.EqualFold(name, "local") || strings.ContainsAny(name, " \\") || strings.Contains(name, "..") {
		return nil, fmt.Errorf("%q is not an IANA time zone name (like Europe/Berlin, America/New_York or UTC)", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("%q is not an IANA time zone name (like Europe/Berlin, America/New_York or UTC)", name)
	}
	return loc, nil
}

type currentTimeResult struct {
	Timezone  string `json:"timezone"`
	Time      string `json:"time"`
	Date      string `json:"date"`
	Weekday   string `json:"weekday"`
	UTCOffset string `json:"utc_offset"`
	Unix      int64  `json:"unix"`
}

// Call answers with a JSON object: timezone, time (RFC 3339), date,
// weekday, utc_offset and unix seconds. An unknown time zone is an error
// the model sees.
func (t CurrentTime) Call(_ context.Context, args json.RawMessage) (string, error) {
	var a struct {
		Timezone string `json:"timezone"`
	}
	if len(bytes.TrimSpace(args)) > 0 {
		if err := json.Unmarshal(args, &a); err != nil {
			return "", fmt.Errorf("invalid arguments: want {\"timezone\": \"Area/City\"}: %w", err)
		}
	}
	loc := t.Zone
	if loc == nil {
		loc = time.UTC
	}
	if a.Timezone != "" {
		var err error
		if loc, err = LoadZone(a.Timezone); err != nil {
			return "", err
		}
	}
	clock := t.Now
	if clock == nil {
		clock = time.Now
	}
	now := clock().In(loc)
	out, err := json.Marshal(currentTimeResult{
		Timezone:  loc.String(),
		Time:      now.Format(time.RFC3339),
		Date:      now.Format(time.DateOnly),
		Weekday:   now.Weekday().String(),
		UTCOffset: now.Format("-07:00"),
		Unix:      now.Unix(),
	})
	if err != nil {
		return "", fmt.Errorf("failed to encode time: %w", err)
	}
	return string(out), nil
}

// RoomInfo is what room_info tells the model about the conversation's room.
type RoomInfo struct {
	RoomID id.RoomID `json:"room_id"`
	Name   string    `json:"name,omitempty"`
	Topic  string    `json:"topic,omitempty"`
	// ThreadID is the thread the conversation happens in ("" at room level).
	ThreadID    id.EventID `json:"thread_id,omitempty"`
	MemberCount int        `json:"member_count"`
}

// RoomInfoFunc returns the info of the room a tool call is for; the bot
// supplies it (agents know nothing of Matrix). ToolCallFrom(ctx) names the
// room, thread and agent of the call.
type RoomInfoFunc func(ctx context.Context) (RoomInfo, error)

// RoomInfoTool returns the room_info tool, answering from fn.
func RoomInfoTool(fn RoomInfoFunc) Tool {
	return NewTool(ToolSpec{
		Name:        ToolRoomInfo,
		Description: "Get information about the chat room and thread of this conversation: room id, name, topic, thread id and number of members.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
	}, func(ctx context.Context, _ json.RawMessage) (string, error) {
		if fn == nil {
			return "", errors.New("room information is not available")
		}
		info, err := fn(ctx)
		if err != nil {
			return "", fmt.Errorf("failed to get room information: %w", err)
		}
		out, err := json.Marshal(info)
		if err != nil {
			return "", fmt.Errorf("failed to encode room information: %w", err)
		}
		return string(out), nil
	})
}

// ScheduleArgs are the arguments of a schedule tool call.
type ScheduleArgs struct {
	// Action is "create" (the default), "list" or "cancel".
	Action string `json:"action,omitempty"`
	// When is the schedule in one of the plain forms ("in 10 minutes",
	// "every weekday at 9:00", …), for create.
	When string `json:"when,omitempty"`
	// Message is what to post when it fires, for create.
	Message string `json:"message,omitempty"`
	// ID is the schedule to cancel.
	ID string `json:"id,omitempty"`
}

// ScheduleFunc carries out a schedule tool call for the room, thread and
// person of the call (ToolCallFrom(ctx)) and returns the answer for the
// model; the bot supplies it.
type ScheduleFunc func(ctx context.Context, args ScheduleArgs) (string, error)

// ScheduleTool returns the schedule tool, answering with fn.
func ScheduleTool(fn ScheduleFunc) Tool {
	return NewTool(ToolSpec{
		Name: ToolSchedule,
		Description: "Schedule a message to be posted later in this conversation's thread, once or recurring, " +
			"on behalf of the person you are talking to; when it fires, it is sent to you as a new message from them. " +
			"Also lists and cancels this room's schedules. " +
			`when is one of: "in 10 minutes", "in 2 hours", "at 17:30", "tomorrow at 9:00", "on 2026-12-24 at 18:00", ` +
			`"every day at 9:00", "every weekday at 9:00", "every monday at 8:30", "every 15 minutes", ` +
			`"cron */5 * * * *" (times in the server's schedule time zone).`,
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"action":{"type":"string","enum":["create","list","cancel"],"description":"create (default), list or cancel"},` +
			`"when":{"type":"string","description":"when to post, for create"},` +
			`"message":{"type":"string","description":"the message to post, for create"},` +
			`"id":{"type":"string","description":"the schedule id, for cancel"}},"additionalProperties":false}`),
	}, func(ctx context.Context, raw json.RawMessage) (string, error) {
		if fn == nil {
			return "", errors.New("scheduling is not available")
		}
		var a ScheduleArgs
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &a); err != nil {
				return "", fmt.Errorf("invalid arguments: want {\"action\", \"when\", \"message\", \"id\"}: %w", err)
			}
		}
		return fn(ctx, a)
	})
}
