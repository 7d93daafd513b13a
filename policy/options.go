package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Options is the authorization policy as config.yaml writes it (under
// authorization:). Its zero value adds no restriction to the room rules
// (room_permissions, default_room_access, invites), which is hookroom's
// behaviour without these settings.
type Options struct {
	// GlobalUsers may talk to every agent in every room and in DMs, and run
	// admin commands (!pair among them): user patterns. An exact user id
	// is a pattern, so the lists of today's configs stay valid.
	GlobalUsers []string `yaml:"global_users"`
	// Aliases maps a pattern of puppet accounts (bridged users) to the one
	// user they stand for: "@telegram_123:example.org": "@alice:example.org".
	// The person who sent a message is the alias's user for every decision
	// (global users, reply_to, pairing, rate limits).
	Aliases map[string]id.UserID `yaml:"aliases"`
	// DM is the DM policy of agents that set none: allowlist (the
	// default), open or pairing.
	DM DMPolicy `yaml:"dm"`
	// Agents holds the rules of single agents, by agent name.
	Agents map[hooks.AgentName]AgentOptions `yaml:"agents"`
	// Pairing tunes the one-time codes of DM policy pairing.
	Pairing PairingOptions `yaml:"pairing"`
}

// AgentOptions are the rules of one agent.
type AgentOptions struct {
	// ReplyTo, when not empty, is the complete list of who the agent
	// answers (besides global users). Each entry is a user pattern
	// ("@*:example.org"), "*" (everyone), "room:REF" (anyone writing in
	// that room) or "members:REF" (anyone joined to that room, wherever
	// they write), where REF is a room id (!…), a room alias (#…:server)
	// or the key of a configured room. Empty: the room rules decide.
	ReplyTo []string `yaml:"reply_to"`
	// DM is the agent's DM policy; empty means Options.DM.
	DM DMPolicy `yaml:"dm"`
}

// DMPolicy says who may talk to an agent in a direct message.
type DMPolicy string

// The DM policies.
const (
	// DMAllowlist (the default): the people reply_to lists, or, for an
	// agent without reply_to, the people the room rules admit (in a DM:
	// its inviter, while invite_users still admits them).
	DMAllowlist DMPolicy = "allowlist"
	// DMOpen: anyone.
	DMOpen DMPolicy = "open"
	// DMPairing: as allowlist, and anyone else an administrator paired
	// with the agent; someone unknown is given a one-time code that an
	// administrator confirms with !pair CODE.
	DMPairing DMPolicy = "pairing"
)

// PairingOptions tune pairing codes.
type PairingOptions struct {
	// CodeTTL is how long a pairing code stays valid. Default 1h.
	CodeTTL time.Duration `yaml:"code_ttl"`
	// MaxPendingCodes bounds the codes waiting for an administrator at
	// once, over every agent; past it, unknown people get no code until
	// some expire or are confirmed. Default 100.
	MaxPendingCodes int `yaml:"max_pending_codes"`
}

// The pairing defaults.
const (
	DefaultCodeTTL         = time.Hour
	DefaultMaxPendingCodes = 100
)

// WithDefaults returns o with zero fields set to their defaults.
func (o PairingOptions) WithDefaults() PairingOptions {
	if o.CodeTTL == 0 {
		o.CodeTTL = DefaultCodeTTL
	}
	if o.MaxPendingCodes == 0 {
		o.MaxPendingCodes = DefaultMaxPendingCodes
	}
	return o
}

// RoomRef names a room in a reply_to entry: a room id ("!abc:example.org",
// or a server-less room id of room version 12), an alias
// ("#team:example.org") or the key of a room of config.yaml ("lobby").
type RoomRef string

// RoomResolver turns a RoomRef into the id of the room it names, or ""
// when it names no room known (then the entry matches nothing). bot
// implements it with the rooms it provisioned and knows; New calls it once
// per room entry.
type RoomResolver func(RoomRef) id.RoomID

// FieldError is one problem of Options or RateLimits: Path is the key path
// of the offending entry relative to the options' own key
// ("global_users[2]", "agents.coder.reply_to[0]",
// `aliases["@tg_*:example.org"]`), written like config's key paths.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// Errors is every problem Validate found, in key order.
type Errors []*FieldError

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, fe := range e {
		msgs[i] = fe.Error()
	}
	return strings.Join(msgs, "\n")
}

type problems Errors

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return Errors(p)
}

// Validate reports every malformed entry of o, as Errors (nil when o is
// valid).
func (o Options) Validate() error {
	var p problems
	o.check(&p)
	return p.err()
}

func (o Options) check(p *problems) {
	for i, s := range o.GlobalUsers {
		if _, err := ParsePattern(s); err != nil {
			p.add(joinIndex("global_users", i), "%s", patternReason(err))
		}
	}
	exactAliases := map[userKey]string{}
	for _, key := range slices.Sorted(maps.Keys(o.Aliases)) {
		path := joinKey("aliases", key)
		if pat, err := ParsePattern(key); err != nil {
			p.add(path, "%s", patternReason(err))
		} else if pat.IsExact() {
			k := userKey{pat.local.parts[0], hostKey{pat.server.host, pat.server.port}}
			if other, dup := exactAliases[k]; dup && o.Aliases[other] != o.Aliases[key] {
				p.add(path, "names the same account as %q (server names ignore case), for another user", other)
			}
			exactAliases[k] = key
		}
		if !validUserID(o.Aliases[key]) {
			p.add(path, "%q is not a user id: an alias stands for one user (@alice:example.org)", o.Aliases[key])
		}
	}
	if err := o.DM.check(); err != "" {
		p.add("dm", "%s", err)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Agents)) {
		a := o.Agents[name]
		base := joinKey("agents", string(name))
		if name == "" {
			p.add(base, "an agent name may not be empty")
		}
		for i, s := range a.ReplyTo {
			if _, err := parseEntry(s); err != nil {
				p.add(joinIndex(joinKey(base, "reply_to"), i), "%s", err)
			}
		}
		if err := a.DM.check(); err != "" {
			p.add(joinKey(base, "dm"), "%s", err)
		}
	}
	if o.Pairing.CodeTTL < 0 {
		p.add("pairing.code_ttl", "must not be negative")
	} else if o.Pairing.CodeTTL != 0 && o.Pairing.CodeTTL < time.Minute {
		p.add("pairing.code_ttl", "must be at least 1m (an administrator needs the time to confirm), not %s", o.Pairing.CodeTTL)
	}
	if o.Pairing.MaxPendingCodes < 0 {
		p.add("pairing.max_pending_codes", "must not be negative")
	}
}

// patternReason is a pattern error without the pattern's own quoting when
// the path names it already.
func patternReason(err error) string {
	if pe, ok := err.(*PatternError); ok {
		return fmt.Sprintf("%q: %s", pe.Pattern, pe.Reason)
	}
	return err.Error()
}

// validUserID reports whether u is one syntactically valid user id with a
// non-empty localpart and no wildcard.
func validUserID(u id.UserID) bool {
	local, _, err := u.ParseAndValidateRelaxed()
	return err == nil && local != "" && !strings.Contains(string(u), "*")
}

func (d DMPolicy) check() string {
	switch d {
	case "", DMAllowlist, DMOpen, DMPairing:
		return ""
	}
	return fmt.Sprintf("must be %q, %q or %q, not %q", DMAllowlist, DMOpen, DMPairing, string(d))
}

// entryKind is the kind of a reply_to entry.
type entryKind uint8

const (
	entryPattern entryKind = iota
	entryEveryone
	entryRoom
	entryMembers
)

// entry is one parsed reply_to entry.
type entry struct {
	kind    entryKind
	pattern Pattern
	room    RoomRef
}

// parseEntry parses a reply_to entry; the error says why it is malformed.
func parseEntry(s string) (entry, error) {
	switch {
	case s == "*":
		return entry{kind: entryEveryone}, nil
	case strings.HasPrefix(s, "@"):
		p, err := ParsePattern(s)
		if err != nil {
			return entry{}, fmt.Errorf("%s", patternReason(err))
		}
		return entry{kind: entryPattern, pattern: p}, nil
	}
	prefix, ref, ok := strings.Cut(s, ":")
	kind := entryRoom
	switch {
	case ok && prefix == "room":
	case ok && prefix == "members":
		kind = entryMembers
	default:
		return entry{}, fmt.Errorf(`%q is neither a user pattern (@alice:example.org, @*:example.org), "*", "room:ROOM" nor "members:ROOM"`, s)
	}
	if problem := RoomRef(ref).check(); problem != "" {
		return entry{}, fmt.Errorf("%q: %s", s, problem)
	}
	return entry{kind: kind, room: RoomRef(ref)}, nil
}

// check says what is wrong with a room reference, or "".
func (r RoomRef) check() string {
	s := string(r)
	switch {
	case s == "":
		return "no room after the colon (a room id !…, an alias #…:server or a room key)"
	case strings.ContainsAny(s, " \t\r\n"):
		return "a room reference holds no spaces"
	case s[0] == '!':
		if len(s) == 1 {
			return "empty room id"
		}
	case s[0] == '#':
		local, server, ok := strings.Cut(s[1:], ":")
		if !ok || local == "" || !id.ValidateServerName(server) {
			return fmt.Sprintf("%q is not a room alias (#name:server)", s)
		}
	default:
		if !isPlainKey(s) {
			return fmt.Sprintf("%q is not a room id (!…), an alias (#…:server) or a room key (letters, digits, _ and -)", s)
		}
	}
	return ""
}

// RateLimits are the message rate limits as config.yaml writes them (under
// rate_limits:). The zero value limits nothing.
type RateLimits struct {
	// PerPerson bounds the messages one person may send to agents, over
	// every room and agent.
	PerPerson Rate `yaml:"per_person"`
	// PerRoom bounds the messages to agents in one room, over everyone.
	PerRoom Rate `yaml:"per_room"`
	// Agents adds limits on the messages to single agents, by agent name;
	// they apply besides the global ones, with buckets of their own.
	Agents map[hooks.AgentName]AgentRateLimits `yaml:"agents"`
	// MaxBuckets bounds the buckets kept in memory per limit; past it the
	// least recently used is dropped. Default 10000.
	MaxBuckets int `yaml:"max_buckets"`
}

// AgentRateLimits are the limits on the messages to one agent.
type AgentRateLimits struct {
	PerPerson Rate `yaml:"per_person"`
	PerRoom   Rate `yaml:"per_room"`
}

// Rate is a token bucket: PerMinute messages a minute on average, up to
// Burst at once. PerMinute 0 is no limit.
type Rate struct {
	// PerMinute is how many messages a minute the bucket refills; it may
	// be fractional (0.5: one every two minutes).
	PerMinute float64 `yaml:"per_minute"`
	// Burst is how many messages may come at once after a quiet time.
	// Default: PerMinute rounded up (at least 1).
	Burst int `yaml:"burst"`
}

// DefaultMaxBuckets is RateLimits.MaxBuckets's default.
const DefaultMaxBuckets = 10000

// Limited reports whether r limits anything.
func (r Rate) Limited() bool { return r.PerMinute > 0 }

// burst returns the bucket size, with its default.
func (r Rate) burst() int {
	if r.Burst > 0 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.PerMinute)))
}

// Validate reports every malformed entry of r, as Errors (nil when r is
// valid).
func (r RateLimits) Validate() error {
	var p problems
	r.PerPerson.check(&p, "per_person")
	r.PerRoom.check(&p, "per_room")
	for _, name := range slices.Sorted(maps.Keys(r.Agents)) {
		base := joinKey("agents", string(name))
		if name == "" {
			p.add(base, "an agent name may not be empty")
		}
		r.Agents[name].PerPerson.check(&p, joinKey(base, "per_person"))
		r.Agents[name].PerRoom.check(&p, joinKey(base, "per_room"))
	}
	if r.MaxBuckets < 0 {
		p.add("max_buckets", "must not be negative")
	}
	return p.err()
}

func (r Rate) check(p *problems, path string) {
	switch {
	case r.PerMinute < 0 || math.IsNaN(r.PerMinute):
		p.add(joinKey(path, "per_minute"), "must be a positive number of messages a minute (0: no limit)")
	case r.PerMinute > 60000:
		p.add(joinKey(path, "per_minute"), "%g a minute is more than 1000 a second: write 0 for no limit", r.PerMinute)
	}
	switch {
	case r.Burst < 0:
		p.add(joinKey(path, "burst"), "must not be negative")
	case r.Burst > 0 && r.PerMinute == 0:
		p.add(joinKey(path, "burst"), "needs per_minute (a burst alone limits nothing)")
	case r.Burst > 100000:
		p.add(joinKey(path, "burst"), "%d is too large (at most 100000)", r.Burst)
	}
}

// joinKey and joinIndex write key paths the way config does: plain keys
// after a dot, others quoted in brackets.
func joinKey(base, key string) string {
	if !isPlainKey(key) {
		return base + "[" + strconv.Quote(key) + "]"
	}
	if base == "" {
		return key
	}
	return base + "." + key
}

func joinIndex(base string, i int) string { return base + "[" + strconv.Itoa(i) + "]" }

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
