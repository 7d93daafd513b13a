package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Kind is the shape of a schedule.
type Kind string

// The kinds of schedules.
const (
	// KindOnce runs once, at Spec.At.
	KindOnce Kind = "once"
	// KindEvery runs every Spec.Every, counted from its first run.
	KindEvery Kind = "every"
	// KindCron runs at the times of a cron expression (Spec.Cron) in
	// Spec.Zone; "every weekday at 9:00" and the other day forms are cron
	// expressions too.
	KindCron Kind = "cron"
)

// MinInterval is the shortest interval of an "every …" schedule.
const MinInterval = time.Second

// Spec is when a task runs.
type Spec struct {
	Kind Kind
	// At is the time of a one-time schedule.
	At time.Time
	// Every is the interval of an "every …" schedule.
	Every time.Duration
	// Cron is the standard 5-field cron expression of a cron schedule.
	Cron string
	// Zone is the time zone cron expressions and wall-clock times are read
	// in (nil: UTC).
	Zone *time.Location
	// Desc describes the schedule for people ("every weekday at 09:00").
	Desc string

	cron cron.Schedule
}

// Recurring reports whether the schedule runs more than once.
func (s Spec) Recurring() bool { return s.Kind != KindOnce }

func (s Spec) zone() *time.Location {
	if s.Zone == nil {
		return time.UTC
	}
	return s.Zone
}

// First returns the first run of a schedule created at now.
func (s Spec) First(now time.Time) time.Time {
	switch s.Kind {
	case KindOnce:
		return s.At
	case KindEvery:
		return now.Add(s.Every)
	default:
		return s.Next(now)
	}
}

// Next returns the first run strictly after t, or the zero time when there
// is none (a one-time schedule).
func (s Spec) Next(t time.Time) time.Time {
	switch s.Kind {
	case KindEvery:
		return t.Add(s.Every)
	case KindCron:
		if s.cron == nil {
			return time.Time{}
		}
		return s.cron.Next(t.In(s.zone()))
	}
	return time.Time{}
}

// After returns the first run of a recurring schedule that was due at due
// and is later than now: the next one, or, when several were missed, the
// first one after now (an "every" schedule keeps its phase). It returns
// the zero time for a one-time schedule.
func (s Spec) After(due, now time.Time) time.Time {
	switch s.Kind {
	case KindEvery:
		if s.Every <= 0 {
			return time.Time{}
		}
		n := due.Add(s.Every)
		if !n.After(now) {
			skip := now.Sub(due)/s.Every + 1
			n = due.Add(skip * s.Every)
		}
		return n
	case KindCron:
		n := s.Next(due)
		if !n.After(now) {
			n = s.Next(now)
		}
		return n
	}
	return time.Time{}
}

// Encode returns the machine form of the schedule that Decode reads back
// (without Desc and Zone, which are stored apart).
func (s Spec) Encode() string {
	switch s.Kind {
	case KindOnce:
		return "once " + s.At.UTC().Format(time.RFC3339Nano)
	case KindEvery:
		return "every " + s.Every.String()
	default:
		return "cron " + s.Cron
	}
}

// Decode reads the machine form Encode wrote, in zone.
func Decode(enc, desc string, zone *time.Location) (Spec, error) {
	kind, arg, _ := strings.Cut(enc, " ")
	s := Spec{Kind: Kind(kind), Zone: zone, Desc: desc}
	var err error
	switch s.Kind {
	case KindOnce:
		s.At, err = time.Parse(time.RFC3339Nano, arg)
	case KindEvery:
		s.Every, err = time.ParseDuration(arg)
	case KindCron:
		s.Cron = arg
		s.cron, err = parseCron(arg)
	default:
		err = fmt.Errorf("unknown kind %q", kind)
	}
	if err != nil {
		return Spec{}, fmt.Errorf("failed to decode schedule %q: %w", enc, err)
	}
	return s, nil
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a standard 5-field cron expression (or a descriptor
// such as @daily). Time zones come from the task, not the expression.
func parseCron(expr string) (cron.Schedule, error) {
	if strings.Contains(expr, "TZ=") {
		return nil, fmt.Errorf("a cron expression here has no time zone (schedules.timezone sets it)")
	}
	sched, err := cronParser.Parse(expr)
	if err != nil {
		return nil, err
	}
	return sched, nil
}
