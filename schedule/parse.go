package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// ErrUnknownForm is wrapped by Parse's error when the request starts with
// none of the forms it knows (the bot may then ask a model). Other parse
// errors are requests in a known form with a mistake (a past date, a bad
// cron expression), which the person has to fix.
var ErrUnknownForm = errors.New("not a schedule form hookroom knows")

// Forms lists the plain forms Parse understands, for help texts.
const Forms = "`in 10 minutes …`, `at 17:30 …`, `tomorrow at 9:00 …`, `on 2026-12-24 at 18:00 …`, " +
	"`every day at 9:00 …`, `every weekday at 9:00 …`, `every monday at 8:30 …`, `every 15 minutes …`, " +
	"`cron \"*/5 * * * *\" …`"

// Parse reads a schedule request such as "in 10 minutes check the build"
// or "every weekday at 9:00 post the stand-up reminder": the schedule,
// then the message to post. Wall-clock times are in zone (nil: UTC); now
// is the time of the request. It returns the schedule and the message.
func Parse(input string, now time.Time, zone *time.Location) (Spec, string, error) {
	if zone == nil {
		zone = time.UTC
	}
	p := &parser{toks: tokenize(input), input: input, now: now.In(zone), zone: zone}
	spec, err := p.parse()
	if err != nil {
		return Spec{}, "", err
	}
	msg := strings.TrimSpace(p.rest())
	if msg == "" {
		return Spec{}, "", fmt.Errorf("nothing to post: write the message after the time (%s …)", strings.TrimSpace(input))
	}
	spec.Zone = zone
	return spec, msg, nil
}

type token struct {
	text string // lower case
	raw  string
	end  int // offset just past the token in the input
}

func tokenize(s string) []token {
	var toks []token
	i := 0
	for i < len(s) {
		r := rune(s[i])
		if unicode.IsSpace(r) {
			i++
			continue
		}
		start := i
		if q := s[i]; q == '"' || q == '\'' || q == '`' {
			if j := strings.IndexByte(s[i+1:], q); j >= 0 {
				i += j + 2
				toks = append(toks, token{text: s[start+1 : i-1], raw: s[start:i], end: i})
				continue
			}
		}
		for i < len(s) && !unicode.IsSpace(rune(s[i])) {
			i++
		}
		raw := s[start:i]
		toks = append(toks, token{text: strings.ToLower(raw), raw: raw, end: i})
	}
	return toks
}

type parser struct {
	toks  []token
	pos   int
	input string
	now   time.Time
	zone  *time.Location
}

func (p *parser) peek() string {
	if p.pos < len(p.toks) {
		return strings.TrimRight(p.toks[p.pos].text, ",:")
	}
	return ""
}

func (p *parser) next() string {
	t := p.peek()
	if p.pos < len(p.toks) {
		p.pos++
	}
	return t
}

func (p *parser) accept(words ...string) bool {
	for _, w := range words {
		if p.peek() == w {
			p.pos++
			return true
		}
	}
	return false
}

// rest is the input after the last consumed token.
func (p *parser) rest() string {
	if p.pos == 0 {
		return p.input
	}
	return p.input[p.toks[p.pos-1].end:]
}

func (p *parser) parse() (Spec, error) {
	switch p.next() {
	case "in":
		return p.in()
	case "at":
		return p.atToday(false)
	case "today":
		p.accept("at")
		return p.atToday(true)
	case "tomorrow":
		p.accept("at")
		return p.onDay(p.now.AddDate(0, 0, 1), "tomorrow")
	case "on":
		d, err := time.ParseInLocation(time.DateOnly, p.next(), p.zone)
		if err != nil {
			return Spec{}, fmt.Errorf("%w: after \"on\" write a date like 2026-12-24", ErrUnknownForm)
		}
		p.accept("at")
		return p.onDay(d, d.Format(time.DateOnly))
	case "every":
		return p.every()
	case "daily":
		p.accept("at")
		return p.days("*", "every day")
	case "cron":
		return p.cron()
	}
	return Spec{}, ErrUnknownForm
}

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// amount reads "10 minutes", "10m", "an hour", "a day".
func (p *parser) amount(allowBareUnit bool) (time.Duration, error) {
	w := p.next()
	if d, ok := units[w]; ok && allowBareUnit { // "every minute"
		return d, nil
	}
	n := 1
	if w != "a" && w != "an" {
		num := strings.TrimRightFunc(w, unicode.IsLetter)
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return 0, fmt.Errorf("%w: expected a number of seconds, minutes, hours, days or weeks", ErrUnknownForm)
		}
		n = v
		if suffix := w[len(num):]; suffix != "" { // "10m"
			d, ok := units[suffix]
			if !ok {
				return 0, fmt.Errorf("%w: unknown unit %q", ErrUnknownForm, suffix)
			}
			return time.Duration(n) * d, nil
		}
	}
	d, ok := units[p.next()]
	if !ok {
		return 0, fmt.Errorf("%w: expected seconds, minutes, hours, days or weeks after the number", ErrUnknownForm)
	}
	return time.Duration(n) * d, nil
}

func (p *parser) in() (Spec, error) {
	d, err := p.amount(false)
	if err != nil {
		return Spec{}, err
	}
	at := p.now.Add(d)
	return Spec{Kind: KindOnce, At: at, Desc: "once, " + formatAt(at, p.zone)}, nil
}

// clock reads a time of day: 9, 9:30, 09:30, 17:30, 9am, 5:30pm, 9 am.
func (p *parser) clock() (hour, minute int, err error) {
	w := p.next()
	bad := fmt.Errorf("%w: expected a time of day like 9:00 or 17:30", ErrUnknownForm)
	suffix := ""
	for _, s := range []string{"am", "pm"} {
		if strings.HasSuffix(w, s) {
			w, suffix = strings.TrimSuffix(w, s), s
		}
	}
	if suffix == "" && (p.peek() == "am" || p.peek() == "pm") {
		suffix = p.next()
	}
	hs, ms, hasMin := strings.Cut(w, ":")
	if hour, err = strconv.Atoi(hs); err != nil || hs == "" {
		return 0, 0, bad
	}
	if hasMin {
		if minute, err = strconv.Atoi(ms); err != nil || len(ms) != 2 {
			return 0, 0, bad
		}
	} else if suffix == "" {
		return 0, 0, bad // a bare number is no time of day
	}
	switch suffix {
	case "am", "pm":
		if hour < 1 || hour > 12 {
			return 0, 0, fmt.Errorf("%d%s is not a time of day", hour, suffix)
		}
		hour %= 12
		if suffix == "pm" {
			hour += 12
		}
	}
	if hour > 23 || minute > 59 || hour < 0 || minute < 0 {
		return 0, 0, fmt.Errorf("%s is not a time of day", w)
	}
	return hour, minute, nil
}

func (p *parser) atToday(explicitToday bool) (Spec, error) {
	h, m, err := p.clock()
	if err != nil {
		return Spec{}, err
	}
	at := time.Date(p.now.Year(), p.now.Month(), p.now.Day(), h, m, 0, 0, p.zone)
	if !at.After(p.now) {
		if explicitToday {
			return Spec{}, fmt.Errorf("%s today has passed (it is %s)", at.Format("15:04"), p.now.Format("15:04 MST"))
		}
		at = time.Date(p.now.Year(), p.now.Month(), p.now.Day()+1, h, m, 0, 0, p.zone)
	}
	return Spec{Kind: KindOnce, At: at, Desc: "once, " + formatAt(at, p.zone)}, nil
}

func (p *parser) onDay(day time.Time, what string) (Spec, error) {
	h, m, err := p.clock()
	if err != nil {
		return Spec{}, fmt.Errorf("%w: write %s at TIME, e.g. %s at 9:00", ErrUnknownForm, what, what)
	}
	at := time.Date(day.Year(), day.Month(), day.Day(), h, m, 0, 0, p.zone)
	if !at.After(p.now) {
		return Spec{}, fmt.Errorf("%s has passed (it is %s)", formatAt(at, p.zone), p.now.Format("2006-01-02 15:04 MST"))
	}
	return Spec{Kind: KindOnce, At: at, Desc: "once, " + formatAt(at, p.zone)}, nil
}

var weekdays = map[string]int{
	"sunday": 0, "sun": 0, "sundays": 0,
	"monday": 1, "mon": 1, "mondays": 1,
	"tuesday": 2, "tue": 2, "tues": 2, "tuesdays": 2,
	"wednesday": 3, "wed": 3, "wednesdays": 3,
	"thursday": 4, "thu": 4, "thur": 4, "thurs": 4, "thursdays": 4,
	"friday": 5, "fri": 5, "fridays": 5,
	"saturday": 6, "sat": 6, "saturdays": 6,
}

var dayNames = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

func (p *parser) every() (Spec, error) {
	switch w := p.peek(); {
	case w == "day":
		p.next()
		p.accept("at")
		return p.days("*", "every day")
	case w == "weekday" || w == "weekdays":
		p.next()
		p.accept("at")
		return p.days("1-5", "every weekday")
	case w == "weekend" || w == "weekends":
		p.next()
		p.accept("at")
		return p.days("0,6", "every weekend day")
	}
	if _, ok := weekdays[p.peek()]; ok {
		var nums, names []string
		for {
			for _, part := range strings.Split(p.peek(), ",") {
				d, ok := weekdays[part]
				if !ok {
					return Spec{}, fmt.Errorf("%w: %q is not a day of the week", ErrUnknownForm, part)
				}
				nums, names = append(nums, strconv.Itoa(d)), append(names, dayNames[d])
			}
			p.next()
			if p.accept("and") {
				continue
			}
			if _, more := weekdays[strings.Split(p.peek(), ",")[0]]; !more {
				break
			}
		}
		p.accept("at")
		return p.days(strings.Join(nums, ","), "every "+strings.Join(names, ", "))
	}
	d, err := p.amount(true)
	if err != nil {
		return Spec{}, fmt.Errorf("%w: write every day at 9:00, every weekday at 9:00, every monday at 9:00 or every 15 minutes", ErrUnknownForm)
	}
	if d < MinInterval {
		return Spec{}, fmt.Errorf("the interval must be at least %s", MinInterval)
	}
	return Spec{Kind: KindEvery, Every: d, Desc: "every " + describeInterval(d)}, nil
}

// days builds the cron schedule for "at TIME" on the days of week dow.
func (p *parser) days(dow, desc string) (Spec, error) {
	h, m, err := p.clock()
	if err != nil {
		return Spec{}, fmt.Errorf("%w: write %s at TIME, e.g. %s at 9:00", ErrUnknownForm, desc, desc)
	}
	expr := fmt.Sprintf("%d %d * * %s", m, h, dow)
	sched, err := parseCron(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("failed to build the schedule: %w", err)
	}
	return Spec{Kind: KindCron, Cron: expr, cron: sched, Desc: fmt.Sprintf("%s at %02d:%02d (%s)", desc, h, m, p.zone)}, nil
}

func (p *parser) cron() (Spec, error) {
	if p.pos >= len(p.toks) {
		return Spec{}, fmt.Errorf("%w: write cron \"*/5 * * * *\" and the message", ErrUnknownForm)
	}
	var expr string
	if t := p.toks[p.pos]; t.raw != t.text && strings.ContainsAny(t.raw[:1], "\"'`") {
		expr = strings.Join(strings.Fields(t.text), " ")
		p.pos++
	} else if strings.HasPrefix(t.text, "@") {
		expr = t.text
		p.pos++
	} else {
		if p.pos+5 > len(p.toks) {
			return Spec{}, fmt.Errorf("a cron expression has 5 fields: minute hour day-of-month month day-of-week; quote it: cron \"*/5 * * * *\" …")
		}
		fields := make([]string, 5)
		for i := range fields {
			fields[i] = p.toks[p.pos+i].text
		}
		expr = strings.Join(fields, " ")
		p.pos += 5
	}
	sched, err := parseCron(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("invalid cron expression %q: %w", expr, err)
	}
	return Spec{Kind: KindCron, Cron: expr, cron: sched, Desc: fmt.Sprintf("cron %q (%s)", expr, p.zone)}, nil
}

// describeInterval says "15 minutes", "hour", "2 days".
func describeInterval(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{7 * 24 * time.Hour, "week"}, {24 * time.Hour, "day"}, {time.Hour, "hour"}, {time.Minute, "minute"}, {time.Second, "second"}} {
		if d%u.d == 0 {
			if n := d / u.d; n == 1 {
				return u.name
			} else {
				return fmt.Sprintf("%d %ss", n, u.name)
			}
		}
	}
	return d.String()
}

// formatAt formats a point in time for people, in zone.
func formatAt(t time.Time, zone *time.Location) string {
	return t.In(zone).Format("Mon 2006-01-02 15:04:05 MST")
}

// FormatTime formats t in zone the way hookroom shows run times.
func FormatTime(t time.Time, zone *time.Location) string {
	if zone == nil {
		zone = time.UTC
	}
	return formatAt(t, zone)
}
