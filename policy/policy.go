package policy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Policy is Options compiled for deciding. It is immutable and safe for
// concurrent use; a reload builds a new one. A nil *Policy is the zero
// Options: the room rules decide alone.
type Policy struct {
	global      *PatternSet
	globalRules []string    // the rule text of each global_users entry
	aliases     *PatternSet // the puppet patterns, the exact ones first, then the most specific first
	aliasOf     []alias     // aliasOf[i] is what aliases.Pattern(i) stands for
	dm          DMPolicy
	dmPath      string
	agents      map[hooks.AgentName]*agentRules
	pairing     PairingOptions
	unresolved  []string
	anyAgent    *agentRules // the rules of agents without an entry
}

type alias struct {
	pattern Pattern
	user    id.UserID
	path    string
}

// agentRules are one agent's compiled rules.
type agentRules struct {
	dm      DMPolicy
	dmPath  string
	replyTo []string // the entries as written; empty: no reply_to
	rules   []string // the rule text of each entry
	base    string   // "agents.NAME.reply_to"
	noEntry string   // the rule text when no entry admits
	dmRule  string   // "agents.NAME.dm: open"
	// The rule texts of pairing: "agents.NAME.dm: pairing (paired)" and
	// "… (not paired)".
	dmPaired, dmNotPaired string
	// What the entries admit, each with its index in replyTo.
	patterns   *PatternSet
	patternIdx []int // patterns.Pattern(i) is replyTo[patternIdx[i]]
	everyone   int   // index of the first "*", or -1
	rooms      []roomGrant
	members    []roomGrant
}

type roomGrant struct {
	room id.RoomID
	idx  int
}

// New validates o and compiles it. resolve turns the rooms of reply_to
// entries into room ids (nil: only room ids resolve); an entry whose room
// does not resolve matches nothing and is listed by Unresolved.
func New(o Options, resolve RoomResolver) (*Policy, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	p := &Policy{
		dm: cmp.Or(o.DM, DMAllowlist), dmPath: "dm",
		agents: map[hooks.AgentName]*agentRules{}, pairing: o.Pairing.WithDefaults(),
	}
	globals := make([]Pattern, len(o.GlobalUsers))
	for i, s := range o.GlobalUsers {
		globals[i] = MustPattern(s)
		p.globalRules = append(p.globalRules, fmt.Sprintf("%s %q", joinIndex("global_users", i), s))
	}
	p.global = NewPatternSet(globals)
	for key, user := range o.Aliases {
		p.aliasOf = append(p.aliasOf, alias{pattern: MustPattern(key), user: user, path: joinKey("aliases", key)})
	}
	// PatternSet.Match answers the lowest index: order by precedence.
	slices.SortFunc(p.aliasOf, func(x, y alias) int {
		if x.pattern.IsExact() != y.pattern.IsExact() {
			if x.pattern.IsExact() {
				return -1
			}
			return 1
		}
		return cmp.Or(y.pattern.literals()-x.pattern.literals(), cmp.Compare(x.pattern.raw, y.pattern.raw))
	})
	puppets := make([]Pattern, len(p.aliasOf))
	for i, a := range p.aliasOf {
		puppets[i] = a.pattern
	}
	p.aliases = NewPatternSet(puppets)
	for _, name := range slices.Sorted(maps.Keys(o.Agents)) {
		p.agents[name] = p.compileAgent(name, o.Agents[name], resolve)
	}
	p.anyAgent = &agentRules{dm: p.dm, dmPath: p.dmPath, everyone: -1}
	p.anyAgent.setRuleTexts()
	return p, nil
}

func (p *Policy) compileAgent(name hooks.AgentName, o AgentOptions, resolve RoomResolver) *agentRules {
	base := joinKey("agents", string(name))
	a := &agentRules{
		dm: cmp.Or(o.DM, p.dm), dmPath: p.dmPath, replyTo: slices.Clone(o.ReplyTo),
		base: joinKey(base, "reply_to"), everyone: -1,
	}
	if o.DM != "" {
		a.dmPath = joinKey(base, "dm")
	}
	a.setRuleTexts()
	var patterns []Pattern
	for i, s := range o.ReplyTo {
		a.rules = append(a.rules, fmt.Sprintf("%s %q", joinIndex(a.base, i), s))
		e, _ := parseEntry(s) // validated
		switch e.kind {
		case entryEveryone:
			if a.everyone < 0 {
				a.everyone = i
			}
		case entryPattern:
			patterns = append(patterns, e.pattern)
			a.patternIdx = append(a.patternIdx, i)
		case entryRoom, entryMembers:
			room := resolveRoom(e.room, resolve)
			if room == "" {
				p.unresolved = append(p.unresolved, joinIndex(a.base, i)+" "+s)
				continue
			}
			g := roomGrant{room: room, idx: i}
			if e.kind == entryRoom {
				a.rooms = append(a.rooms, g)
			} else {
				a.members = append(a.members, g)
			}
		}
	}
	a.patterns = NewPatternSet(patterns)
	return a
}

func resolveRoom(ref RoomRef, resolve RoomResolver) id.RoomID {
	if resolve != nil {
		if room := resolve(ref); room != "" {
			return room
		}
	}
	if len(ref) > 0 && ref[0] == '!' {
		return id.RoomID(ref)
	}
	return ""
}

// Unresolved lists the reply_to entries whose room New could not resolve
// (they match nobody), as "PATH ENTRY", for a warning at start-up and
// reload.
func (p *Policy) Unresolved() []string {
	if p == nil {
		return nil
	}
	return slices.Clone(p.unresolved)
}

// Pairing returns the pairing options, defaults applied.
func (p *Policy) Pairing() PairingOptions {
	if p == nil {
		return PairingOptions{}.WithDefaults()
	}
	return p.pairing
}

// Canonical returns the person sender stands for, and the aliases entry
// that says so ("" when sender is nobody's puppet: then person is sender).
// An exact alias wins over wildcard ones; of several wildcard aliases, the
// one with the most literal characters, then the first in byte order.
// Aliases are not chained: the person is never looked up again.
func (p *Policy) Canonical(sender id.UserID) (person id.UserID, aliasPath string) {
	if p == nil {
		return sender, ""
	}
	if i, ok := p.aliases.Match(sender); ok {
		return p.aliasOf[i].user, p.aliasOf[i].path
	}
	return sender, ""
}

// IsGlobal reports whether user (after aliases) is a global user: an
// administrator. Commands such as !pair ask it.
func (p *Policy) IsGlobal(user id.UserID) bool {
	if p == nil {
		return false
	}
	person, _ := p.Canonical(user)
	_, ok := p.global.Match(person)
	return ok
}

// DM returns the DM policy of agent.
func (p *Policy) DM(agent hooks.AgentName) DMPolicy {
	if p == nil {
		return DMAllowlist
	}
	if a := p.agents[agent]; a != nil {
		return a.dm
	}
	return p.dm
}

// Membership answers whether a user is joined to a room. bot implements it
// from the room state it keeps (for one decision it may close over the
// decision's context); it must not block on the network.
type Membership interface {
	IsMember(room id.RoomID, user id.UserID) bool
}

// MembershipFunc adapts a function to Membership.
type MembershipFunc func(room id.RoomID, user id.UserID) bool

// IsMember calls f.
func (f MembershipFunc) IsMember(room id.RoomID, user id.UserID) bool { return f(room, user) }

// Pairings answers whether an administrator paired a person with an
// agent. *Store implements it from memory.
type Pairings interface {
	IsPaired(agent hooks.AgentName, person id.UserID) bool
}

var (
	_ Membership = MembershipFunc(nil)
	_ Pairings   = (*Store)(nil)
)

// Request is what one decision is about, with the facts Decide may need
// from outside the policy. Decide asks the facts only when a rule needs
// them.
type Request struct {
	// Sender is the account that sent the message (maybe a puppet).
	Sender id.UserID
	// Agent is the agent that would answer; "" before routing (then only
	// the global rules and the default DM policy apply).
	Agent hooks.AgentName
	// Room is where the message was sent.
	Room id.RoomID
	// DM is whether Room is a direct message between the sender and the
	// agent's account.
	DM bool
	// RoomRules reports whether the room rules of config.yaml
	// (room_permissions, default_room_access, the inviter of a room
	// joined on an invite) admit person in Room; Decide calls it with the
	// person after aliases. nil admits nobody.
	RoomRules func(person id.UserID) bool
	// Members answers "members:" entries; nil: nobody is a member.
	Members Membership
	// Pairings answers DM policy pairing; nil: nobody is paired.
	Pairings Pairings
}

// Reason is the machine-readable reason of a Decision: a small fixed set,
// fit for a metric label.
type Reason string

// The reasons. The first five allow, the others deny.
const (
	ReasonGlobalUser      Reason = "global_user"       // a global_users pattern names the person
	ReasonReplyTo         Reason = "reply_to"          // an entry of the agent's reply_to admits them
	ReasonRoomRules       Reason = "room_rules"        // the room rules admit them and no reply_to restricts the agent
	ReasonDMOpen          Reason = "dm_open"           // a DM with an agent whose DM policy is open
	ReasonPaired          Reason = "paired"            // a DM with an agent the person was paired with
	ReasonRoomRulesDenied Reason = "room_rules_denied" // the room rules do not admit them
	ReasonNotInReplyTo    Reason = "not_in_reply_to"   // the agent has reply_to, and no entry admits them
	ReasonPairingRequired Reason = "pairing_required"  // a DM under policy pairing, not paired (yet): give them a code
	ReasonInvalidSender   Reason = "invalid_sender"    // the sender is no valid user id
)

// Decision is the answer of Decide: allowed or not, and the rule that
// decided.
type Decision struct {
	Allow  bool
	Reason Reason
	// Rule names the rule that decided, for people and logs:
	// `global_users[0] "@*:example.org"`, `agents.coder.reply_to[2]
	// "members:#staff:example.org"`, "agents.coder.dm: pairing (not
	// paired)".
	Rule string
	// Sender sent the message; Person is who it counts as (Sender unless
	// the aliases entry Alias made it a puppet of Person).
	Sender, Person id.UserID
	Alias          string
	Agent          hooks.AgentName
	Room           id.RoomID
	DM             bool
}

// String renders the decision on one line.
func (d Decision) String() string {
	verdict := "deny"
	if d.Allow {
		verdict = "allow"
	}
	who := string(d.Person)
	if d.Alias != "" {
		who = fmt.Sprintf("%s (as %s by %s)", d.Sender, d.Person, d.Alias)
	}
	return fmt.Sprintf("%s %s → %q in %s: %s [%s]", verdict, who, d.Agent, d.Room, d.Rule, d.Reason)
}

// MarshalZerologObject writes the decision as log fields, for
//
//	log.Debug().Object("authorization", d).Msg("authorization decided")
func (d Decision) MarshalZerologObject(e *zerolog.Event) {
	e.Bool("allow", d.Allow).Str("reason", string(d.Reason)).Str("rule", d.Rule).
		Stringer("sender", d.Sender).Str("agent", string(d.Agent)).Stringer("room_id", d.Room).Bool("dm", d.DM)
	if d.Alias != "" {
		e.Stringer("person", d.Person).Str("alias", d.Alias)
	}
}

var _ zerolog.LogObjectMarshaler = Decision{}

// The rule texts of the room rules.
const (
	ruleRoomRules       = "the room rules (room_permissions, default_room_access, invites)"
	ruleRoomRulesDenied = "not admitted by the room rules (room_permissions, default_room_access, invites)"
)

// Decide decides whether the person behind r.Sender may talk to r.Agent in
// r.Room. It is pure: the answer depends on p and r alone, and it changes
// nothing. In order, the first that applies decides:
//
//  1. The sender is replaced by the person an alias names (Canonical);
//     every rule below is about that person.
//  2. A global user: allowed.
//  3. In a DM, the agent's DM policy: open allows; allowlist and pairing
//     allow whom the agent's reply_to admits (or, without reply_to, whom
//     the room rules admit); pairing then allows a paired person and asks
//     for pairing otherwise; allowlist denies.
//  4. Elsewhere: the room rules must admit the person; then, when the
//     agent has reply_to, one of its entries must admit them.
//
// A reply_to entry admits the person when it is "*", a pattern naming
// them, "room:R" with R the request's room, or "members:R" with the person
// (or, for a puppet, the puppet account) joined to R. Patterns are tried
// first, then "*", then room: and members: entries, the lowest index
// first within each; the entry that admitted is the decision's rule.
func (p *Policy) Decide(r Request) Decision {
	d := Decision{Sender: r.Sender, Person: r.Sender, Agent: r.Agent, Room: r.Room, DM: r.DM}
	if p == nil {
		p = zeroPolicy
	}
	d.Person, d.Alias = p.Canonical(r.Sender)
	if _, _, ok := splitUserID(d.Person); !ok {
		return d.deny(ReasonInvalidSender, "the sender is not a valid user id")
	}
	if i, ok := p.global.Match(d.Person); ok {
		return d.allow(ReasonGlobalUser, p.globalRules[i])
	}
	a := p.agents[r.Agent]
	if a == nil {
		a = p.anyAgent
	}
	roomRules := func() bool { return r.RoomRules != nil && r.RoomRules(d.Person) }
	if r.DM {
		if a.dm == DMOpen {
			return d.allow(ReasonDMOpen, a.dmRule)
		}
		if len(a.replyTo) > 0 {
			if rule, ok := a.admits(d.Person, r); ok {
				return d.allow(ReasonReplyTo, rule)
			}
		} else if roomRules() {
			return d.allow(ReasonRoomRules, ruleRoomRules)
		}
		if a.dm == DMPairing {
			if r.Pairings != nil && r.Pairings.IsPaired(r.Agent, d.Person) {
				return d.allow(ReasonPaired, a.dmPaired)
			}
			return d.deny(ReasonPairingRequired, a.dmNotPaired)
		}
		if len(a.replyTo) > 0 {
			return d.deny(ReasonNotInReplyTo, a.noEntry)
		}
		return d.deny(ReasonRoomRulesDenied, ruleRoomRulesDenied)
	}
	if !roomRules() {
		return d.deny(ReasonRoomRulesDenied, ruleRoomRulesDenied)
	}
	if len(a.replyTo) == 0 {
		return d.allow(ReasonRoomRules, ruleRoomRules)
	}
	if rule, ok := a.admits(d.Person, r); ok {
		return d.allow(ReasonReplyTo, rule)
	}
	return d.deny(ReasonNotInReplyTo, a.noEntry)
}

// zeroPolicy is the policy of the zero Options.
var zeroPolicy = func() *Policy {
	p, err := New(Options{}, nil)
	if err != nil {
		panic(err)
	}
	return p
}()

// admits returns the rule of the first reply_to entry admitting person.
func (a *agentRules) admits(person id.UserID, r Request) (string, bool) {
	if i, ok := a.patterns.Match(person); ok {
		return a.rule(a.patternIdx[i]), true
	}
	if a.everyone >= 0 {
		return a.rule(a.everyone), true
	}
	for _, g := range a.rooms {
		if g.room == r.Room {
			return a.rule(g.idx), true
		}
	}
	if r.Members != nil {
		for _, g := range a.members {
			if r.Members.IsMember(g.room, person) || person != r.Sender && r.Members.IsMember(g.room, r.Sender) {
				return a.rule(g.idx), true
			}
		}
	}
	return "", false
}

func (a *agentRules) rule(i int) string { return a.rules[i] }

// setRuleTexts prepares the rule texts of a's decisions, so that Decide
// builds no strings.
func (a *agentRules) setRuleTexts() {
	a.noEntry = "no entry of " + a.base + " admits them"
	a.dmRule = a.dmPath + ": " + string(a.dm)
	a.dmPaired, a.dmNotPaired = a.dmRule+" (paired)", a.dmRule+" (not paired)"
}

func (d Decision) allow(reason Reason, rule string) Decision {
	d.Allow, d.Reason, d.Rule = true, reason, rule
	return d
}

func (d Decision) deny(reason Reason, rule string) Decision {
	d.Allow, d.Reason, d.Rule = false, reason, rule
	return d
}
