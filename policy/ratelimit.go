package policy

import (
	"container/list"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Limiter is a set of token buckets of one Rate, keyed by any string (a
// person, a room), in memory. A bucket holds up to Burst tokens, refills
// at PerMinute tokens a minute, and each allowed message takes one. A
// bucket that is full again is the same as no bucket, so idle buckets are
// dropped, and at most maxBuckets are kept (the least recently used goes
// first; it starts full when it comes back). Safe for concurrent use.
type Limiter struct {
	mu sync.Mutex
	b  *buckets
}

// NewLimiter returns a Limiter of rate r, keeping at most maxBuckets
// buckets (0: DefaultMaxBuckets). A rate that limits nothing allows
// everything.
func NewLimiter(r Rate, maxBuckets int) *Limiter {
	return &Limiter{b: newBuckets(r, maxBuckets)}
}

// Allow takes a token from key's bucket at now and reports whether there
// was one; when not, retryAfter is how long until there is.
func (l *Limiter) Allow(now time.Time, key string) (ok bool, retryAfter time.Duration) {
	if l.b == nil {
		return true, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.b.state(now, key)
	if st.retry > 0 {
		l.b.sweep(now, key)
		return false, st.retry
	}
	l.b.take(now, st)
	return true, 0
}

// Len returns how many buckets l keeps.
func (l *Limiter) Len() int {
	if l.b == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.lru.Len()
}

// buckets are the token buckets of one rate, without a lock of their own.
// A bucket is kept as the time it will be full again (the generic cell rate
// algorithm's theoretical arrival time), in whole nanoseconds, so refills
// are exact: one token every interval, up to burst.
type buckets struct {
	rate     Rate
	interval time.Duration // between two tokens
	tau      time.Duration // (burst-1) intervals: how far ahead of now full may be
	max      int
	m        map[string]*list.Element // of *bucket
	lru      list.List                // front: most recently used
	evicted  uint64
}

type bucket struct {
	key     string
	full    time.Time // when the bucket holds burst tokens again
	noticed bool      // refused since it last allowed, and the refusal was reported
}

// newBuckets returns the buckets of r, or nil when r limits nothing.
func newBuckets(r Rate, maxBuckets int) *buckets {
	if !r.Limited() {
		return nil
	}
	if maxBuckets <= 0 {
		maxBuckets = DefaultMaxBuckets
	}
	interval := time.Duration(math.Round(float64(time.Minute) / r.PerMinute))
	return &buckets{
		rate: r, interval: interval, tau: time.Duration(r.burst()-1) * interval,
		max: maxBuckets, m: map[string]*list.Element{},
	}
}

// bucketState is what a bucket says at some time, before anything is taken.
type bucketState struct {
	key   string
	el    *list.Element // nil: no bucket (full)
	full  time.Time     // when it is full, now at the latest
	retry time.Duration // 0: a token is there; otherwise the wait for one
}

func (bs *buckets) state(now time.Time, key string) bucketState {
	st := bucketState{key: key, full: now}
	if el, ok := bs.m[key]; ok {
		st.el = el
		if full := el.Value.(*bucket).full; full.After(now) {
			st.full = full
		}
	}
	if ahead := st.full.Sub(now); ahead > bs.tau {
		st.retry = ahead - bs.tau
	}
	return st
}

// take takes one token of st's bucket, creating it when needed.
func (bs *buckets) take(now time.Time, st bucketState) {
	el := st.el
	if el == nil {
		el = bs.lru.PushFront(&bucket{key: st.key})
		bs.m[st.key] = el
	} else {
		bs.lru.MoveToFront(el)
	}
	b := el.Value.(*bucket)
	b.full, b.noticed = st.full.Add(bs.interval), false
	bs.sweep(now, st.key)
}

// refuse marks st's bucket refused and reports whether that is news (the
// first refusal since it last allowed).
func (bs *buckets) refuse(st bucketState) bool {
	if st.el == nil {
		return true // cannot happen: a missing bucket is full
	}
	bs.lru.MoveToFront(st.el)
	b := st.el.Value.(*bucket)
	first := !b.noticed
	b.noticed = true
	return first
}

// sweep drops the least recently used buckets while they are full again
// (but never keep, the one in use), then more until at most max are left.
func (bs *buckets) sweep(now time.Time, keep string) {
	for el := bs.lru.Back(); el != nil; el = bs.lru.Back() {
		b := el.Value.(*bucket)
		if b.key == keep || b.full.After(now) {
			break
		}
		bs.drop(el)
	}
	for bs.lru.Len() > bs.max {
		el := bs.lru.Back()
		if el.Value.(*bucket).key == keep {
			break
		}
		bs.drop(el)
		bs.evicted++
	}
}

func (bs *buckets) drop(el *list.Element) {
	bs.lru.Remove(el)
	delete(bs.m, el.Value.(*bucket).key)
}

// Scope says which limit refused a message.
type Scope string

// The scopes of rate limits.
const (
	ScopePerson Scope = "person"
	ScopeRoom   Scope = "room"
)

// Limits applies RateLimits: the global per-person and per-room limits to
// every message, and an agent's own limits besides to the messages to that
// agent. A message is allowed only when every bucket that applies has a
// token; then each gives one, otherwise none does. Safe for concurrent
// use. Buckets live in memory: a restart, or a new Limits after a reload,
// starts them full.
type Limits struct {
	mu      sync.Mutex
	person  *buckets
	room    *buckets
	agents  map[hooks.AgentName][2]*buckets // person, room
	allowed atomic.Uint64
	limited [2]atomic.Uint64 // person, room
}

// NewLimits validates o and returns its Limits.
func NewLimits(o RateLimits) (*Limits, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	l := &Limits{
		person: newBuckets(o.PerPerson, o.MaxBuckets), room: newBuckets(o.PerRoom, o.MaxBuckets),
		agents: map[hooks.AgentName][2]*buckets{},
	}
	for name, a := range o.Agents {
		b := [2]*buckets{newBuckets(a.PerPerson, o.MaxBuckets), newBuckets(a.PerRoom, o.MaxBuckets)}
		if b[0] != nil || b[1] != nil {
			l.agents[name] = b
		}
	}
	return l, nil
}

// Verdict is the answer of Limits.Allow.
type Verdict struct {
	OK bool
	// For a refusal: the limit that refused (when several did, the one
	// that frees up last), Agent set when it is that agent's own limit,
	// and how long until the message would be allowed.
	Scope      Scope
	Agent      hooks.AgentName
	Rate       Rate
	RetryAfter time.Duration
	// First is true for the first refusal since that bucket last allowed
	// a message: post the notice then, and ignore the next refusals
	// quietly (a notice per refused message would be spam of its own).
	First bool
}

// Allow decides whether person may send one more message to agent in room
// at now, taking a token from every bucket that applies when so. person is
// the Decision's Person (after aliases), so puppets share their person's
// buckets. A nil *Limits allows everything.
func (l *Limits) Allow(now time.Time, agent hooks.AgentName, person id.UserID, room id.RoomID) Verdict {
	if l == nil {
		return Verdict{OK: true}
	}
	type check struct {
		bs    *buckets
		st    bucketState
		scope Scope
		agent hooks.AgentName
	}
	var checks [4]check
	n := 0
	add := func(bs *buckets, key string, scope Scope, agent hooks.AgentName) {
		if bs != nil {
			checks[n] = check{bs: bs, st: bs.state(now, key), scope: scope, agent: agent}
			n++
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	add(l.person, string(person), ScopePerson, "")
	add(l.room, string(room), ScopeRoom, "")
	if a, ok := l.agents[agent]; ok {
		add(a[0], string(person), ScopePerson, agent)
		add(a[1], string(room), ScopeRoom, agent)
	}
	v := Verdict{OK: true}
	for _, c := range checks[:n] {
		if c.st.retry == 0 {
			continue
		}
		first := c.bs.refuse(c.st)
		if retry := c.st.retry; v.OK || retry > v.RetryAfter {
			v = Verdict{Scope: c.scope, Agent: c.agent, Rate: c.bs.rate, RetryAfter: retry, First: v.First}
		}
		v.First = v.First || first
	}
	if !v.OK {
		if v.Scope == ScopePerson {
			l.limited[0].Add(1)
		} else {
			l.limited[1].Add(1)
		}
		return v
	}
	for _, c := range checks[:n] {
		c.bs.take(now, c.st)
	}
	l.allowed.Add(1)
	return v
}

// LimitStats are the counters of a Limits, for metrics.
type LimitStats struct {
	// Allowed counts the messages allowed; LimitedPerson and LimitedRoom
	// the messages refused, by the scope of the limit that refused.
	Allowed, LimitedPerson, LimitedRoom uint64
	// Buckets is how many buckets are kept now; Evicted how many were
	// dropped before they were full again, because of max_buckets.
	Buckets int
	Evicted uint64
}

// Stats returns l's counters (zero for a nil *Limits).
func (l *Limits) Stats() LimitStats {
	if l == nil {
		return LimitStats{}
	}
	s := LimitStats{Allowed: l.allowed.Load(), LimitedPerson: l.limited[0].Load(), LimitedRoom: l.limited[1].Load()}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, bs := range l.all() {
		s.Buckets += bs.lru.Len()
		s.Evicted += bs.evicted
	}
	return s
}

func (l *Limits) all() []*buckets {
	var all []*buckets
	for _, bs := range []*buckets{l.person, l.room} {
		if bs != nil {
			all = append(all, bs)
		}
	}
	for _, a := range l.agents {
		for _, bs := range a {
			if bs != nil {
				all = append(all, bs)
			}
		}
	}
	return all
}

// Notice is the friendly text to post when v refused a message, e.g.
// "You're sending messages faster than hookroom allows for one person
// (5 a minute). Please try again in 20 s." It is "" for an allowed one.
func (v Verdict) Notice() string {
	if v.OK {
		return ""
	}
	var who string
	switch {
	case v.Scope == ScopeRoom && v.Agent != "":
		who = fmt.Sprintf("This room is sending messages to %s faster than hookroom allows", v.Agent)
	case v.Scope == ScopeRoom:
		who = "This room is sending messages faster than hookroom allows"
	case v.Agent != "":
		who = fmt.Sprintf("You're sending messages to %s faster than hookroom allows for one person", v.Agent)
	default:
		who = "You're sending messages faster than hookroom allows for one person"
	}
	return fmt.Sprintf("%s (%s). Please try again in %s.", who, rateText(v.Rate), waitText(v.RetryAfter))
}

// rateText renders a rate: "5 a minute", "1 every 2 minutes", "5 a
// minute, 10 at once".
func rateText(r Rate) string {
	var s string
	switch {
	case r.PerMinute >= 1 && r.PerMinute == math.Trunc(r.PerMinute):
		s = fmt.Sprintf("%d a minute", int(r.PerMinute))
	case r.PerMinute >= 1:
		s = fmt.Sprintf("%.1f a minute", r.PerMinute)
	default:
		minutes := 1 / r.PerMinute
		if minutes == math.Trunc(minutes) {
			s = fmt.Sprintf("1 every %d minutes", int(minutes))
		} else {
			s = fmt.Sprintf("1 every %.1f minutes", minutes)
		}
	}
	if b := r.burst(); b != max(1, int(math.Ceil(r.PerMinute))) {
		s += fmt.Sprintf(", %d at once", b)
	}
	return s
}

// waitText renders a wait rounded up: "1 s", "20 s", "2 min", "1 h 5 min".
func waitText(d time.Duration) string {
	secs := int64(math.Ceil(d.Seconds()))
	switch {
	case secs < 1:
		return "1 s"
	case secs < 90:
		return fmt.Sprintf("%d s", secs)
	}
	mins := (secs + 59) / 60
	if mins < 60 {
		return fmt.Sprintf("%d min", mins)
	}
	if mins%60 == 0 {
		return fmt.Sprintf("%d h", mins/60)
	}
	return fmt.Sprintf("%d h %d min", mins/60, mins%60)
}
