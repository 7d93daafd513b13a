package schedule

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	// Thursday 2026-11-26 14:00 in Berlin (13:00 UTC).
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, berlin)
	at := func(day, h, m int) time.Time { return time.Date(2026, 11, day, h, m, 0, 0, berlin) }
	tests := []struct {
		in   string
		kind Kind
		// first run after now (for every kind)
		first time.Time
		// second run, for recurring schedules
		second time.Time
		cron   string
		msg    string
	}{
		{in: "in 2 seconds say hi", kind: KindOnce, first: now.Add(2 * time.Second), msg: "say hi"},
		{in: "in 10 minutes check the build", kind: KindOnce, first: now.Add(10 * time.Minute), msg: "check the build"},
		{in: "in 10m check", kind: KindOnce, first: now.Add(10 * time.Minute), msg: "check"},
		{in: "in an hour  stretch   your legs", kind: KindOnce, first: now.Add(time.Hour), msg: "stretch   your legs"},
		{in: "In 3 Days Remind me", kind: KindOnce, first: now.Add(72 * time.Hour), msg: "Remind me"},
		{in: "at 17:30 go home", kind: KindOnce, first: at(26, 17, 30), msg: "go home"},
		{in: "at 9:00 stand-up", kind: KindOnce, first: at(27, 9, 0), msg: "stand-up"}, // passed today: tomorrow
		{in: "at 5:30pm tea", kind: KindOnce, first: at(26, 17, 30), msg: "tea"},
		{in: "at 9 am coffee", kind: KindOnce, first: at(27, 9, 0), msg: "coffee"},
		{in: "today at 18:00 dinner", kind: KindOnce, first: at(26, 18, 0), msg: "dinner"},
		{in: "tomorrow at 9:00 review the PR", kind: KindOnce, first: at(27, 9, 0), msg: "review the PR"},
		{in: "tomorrow 9:00: review", kind: KindOnce, first: at(27, 9, 0), msg: "review"},
		{in: "on 2026-12-24 at 18:00 presents", kind: KindOnce, first: time.Date(2026, 12, 24, 18, 0, 0, 0, berlin), msg: "presents"},
		{in: "every day at 9:00 good morning", kind: KindCron, cron: "0 9 * * *", first: at(27, 9, 0), second: at(28, 9, 0), msg: "good morning"},
		{in: "daily at 9:00 good morning", kind: KindCron, cron: "0 9 * * *", first: at(27, 9, 0), second: at(28, 9, 0), msg: "good morning"},
		// Thursday 26th: next weekdays are Fri 27th, then Mon 30th.
		{in: "every weekday at 9:00 stand-up time", kind: KindCron, cron: "0 9 * * 1-5", first: at(27, 9, 0), second: at(30, 9, 0), msg: "stand-up time"},
		{in: "every monday at 8:30 plan the week", kind: KindCron, cron: "30 8 * * 1", first: at(30, 8, 30), second: time.Date(2026, 12, 7, 8, 30, 0, 0, berlin), msg: "plan the week"},
		{in: "every monday, friday at 10:00 sync", kind: KindCron, cron: "0 10 * * 1,5", first: at(27, 10, 0), second: at(30, 10, 0), msg: "sync"},
		{in: "every tue and thu at 14:30 1:1", kind: KindCron, cron: "30 14 * * 2,4", first: at(26, 14, 30), second: time.Date(2026, 12, 1, 14, 30, 0, 0, berlin), msg: "1:1"},
		{in: "every 15 minutes ping", kind: KindEvery, first: now.Add(15 * time.Minute), second: now.Add(30 * time.Minute), msg: "ping"},
		{in: "every hour drink water", kind: KindEvery, first: now.Add(time.Hour), second: now.Add(2 * time.Hour), msg: "drink water"},
		{in: `cron "*/5 * * * *" poll the queue`, kind: KindCron, cron: "*/5 * * * *", first: now.Add(5 * time.Minute), second: now.Add(10 * time.Minute), msg: "poll the queue"},
		{in: "cron `0 12 * * 1-5` lunch", kind: KindCron, cron: "0 12 * * 1-5", first: at(27, 12, 0), second: at(30, 12, 0), msg: "lunch"},
		{in: "cron 0 12 * * * lunch", kind: KindCron, cron: "0 12 * * *", first: at(27, 12, 0), second: at(28, 12, 0), msg: "lunch"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			spec, msg, err := Parse(tc.in, now, berlin)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if spec.Kind != tc.kind || msg != tc.msg || spec.Cron != tc.cron {
				t.Fatalf("got kind %q cron %q msg %q; want %q %q %q", spec.Kind, spec.Cron, msg, tc.kind, tc.cron, tc.msg)
			}
			if first := spec.First(now); !first.Equal(tc.first) {
				t.Errorf("first run %s, want %s", first, tc.first)
			}
			if spec.Recurring() {
				if second := spec.After(spec.First(now), spec.First(now)); !second.Equal(tc.second) {
					t.Errorf("second run %s, want %s", second, tc.second)
				}
			}
			if spec.Desc == "" {
				t.Error("no description")
			}
			// The stored form reads back to the same schedule.
			back, err := Decode(spec.Encode(), spec.Desc, spec.Zone)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := back.First(now), spec.First(now); !got.Equal(want) {
				t.Errorf("decoded first run %s, want %s", got, want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	now := time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		unknown bool // ErrUnknownForm: a model may try
		want    string
	}{
		{in: "remind me next week about the report", unknown: true},
		{in: "sometime soon", unknown: true},
		{in: "in five minutes say hi", unknown: true},
		{in: "in 10 parsecs go", unknown: true},
		{in: "every so often", unknown: true},
		{in: "in 10 minutes", want: "nothing to post"},
		{in: "today at 9:00 too late", want: "has passed"},
		{in: "on 2020-01-01 at 9:00 old", want: "has passed"},
		{in: "at 25:00 nope", want: "not a time of day"},
		{in: "at 13pm nope", want: "not a time of day"},
		{in: `cron "*/5 * * *" four fields`, want: "invalid cron expression"},
		{in: `cron "CRON_TZ=Europe/Berlin 0 9 * * *" zone`, want: "time zone"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, _, err := Parse(tc.in, now, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if got := errors.Is(err, ErrUnknownForm); got != tc.unknown {
				t.Errorf("errors.Is(ErrUnknownForm) = %v, want %v (%v)", got, tc.unknown, err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestSpecAfterSkipsMissedRuns(t *testing.T) {
	due := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	every := Spec{Kind: KindEvery, Every: 15 * time.Minute}
	// Down from 9:00 to 10:07: the next run keeps the quarter-hour phase.
	if got, want := every.After(due, due.Add(67*time.Minute)), due.Add(75*time.Minute); !got.Equal(want) {
		t.Errorf("every: %s, want %s", got, want)
	}
	daily, _, err := Parse("every day at 9:00 x", due.Add(-time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := daily.After(due, due.Add(50*time.Hour)), due.Add(72*time.Hour); !got.Equal(want) {
		t.Errorf("daily: %s, want %s", got, want)
	}
	if got := (Spec{Kind: KindOnce, At: due}).After(due, due); !got.IsZero() {
		t.Errorf("once: %s, want none", got)
	}
}

// Wall-clock schedules follow their zone's daylight saving time: 9:00
// stays 9:00, and a time the spring-forward skips is skipped that day.
func TestSpecFollowsDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2027, 3, 26, 12, 0, 0, 0, berlin) // DST starts Sunday 2027-03-28 02:00
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"every day at 9:00 x", []string{"2027-03-27 09:00 CET", "2027-03-28 09:00 CEST", "2027-03-29 09:00 CEST"}},
		{"every day at 2:30 x", []string{"2027-03-27 02:30 CET", "2027-03-29 02:30 CEST", "2027-03-30 02:30 CEST"}},
	} {
		spec, _, err := Parse(tc.in, now, berlin)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for n := spec.First(now); len(got) < len(tc.want); n = spec.Next(n) {
			got = append(got, n.Format("2006-01-02 15:04 MST"))
		}
		if strings.Join(got, ", ") != strings.Join(tc.want, ", ") {
			t.Errorf("%s: runs %v, want %v", tc.in, got, tc.want)
		}
	}
}
