// Package policy owns who may talk to which agent, and how fast: Matrix
// user patterns, bridge aliases, the authorization decision (Policy.Decide,
// one pure function from a request and its facts to a Decision naming the
// rule that decided), DM pairing (the Store of pairing codes and pairings,
// in the database), and message rate limits per person and per room
// (Limits, token buckets in memory).
//
// The package knows nothing of the sync loop or the turn pipeline: bot
// computes the facts (the room rules of config.yaml, room membership, DM
// or not), asks Decide once per message after routing, posts the pairing
// code or rate-limit notice, and runs !pair. Options and RateLimits are the
// config.yaml settings authorization: and rate_limits:, with yaml tags and
// Validate.
//
// # User patterns
//
// A pattern reads @LOCALPART:SERVER and is split at its first colon, as a
// user id is (a localpart never holds a colon, a server name may: ports,
// IPv6 addresses).
//
// LOCALPART is compared byte for byte, case-sensitively: user ids are
// compared as exact strings by homeservers, and historical user ids with
// upper-case letters exist, so @Alice:example.org names a different user
// than @alice:example.org. Each "*" matches any run of characters,
// including none: @bot-*:example.org matches @bot-:example.org and
// @bot-42:example.org. Because the localpart ends at the first colon, "*"
// can never reach into the server part: @*:example.org does not match
// @x:evil.org:example.org (whose server is evil.org:example.org, a name
// with a port that is no number, which matches nothing anyway). "**" and
// an empty localpart are errors (write @*:SERVER for every user of a
// server); a literal "*" cannot be written.
//
// SERVER is compared ASCII-case-insensitively (server names are DNS names
// or IP addresses, and DNS names are case-insensitive), as a whole, never
// as a suffix:
//
//   - "*" matches every server name, with or without a port: @bot-*:*.
//   - A host ("example.org", "10.0.0.1", "[2001:db8::1]") matches exactly
//     that host without a port. example.org matches neither
//     evil-example.org, sub.example.org, example.org.evil.com, nor
//     example.org:8448 (in Matrix a server name with a port is a different
//     server name).
//   - "*.DOMAIN" matches every subdomain of DOMAIN, at any depth, and not
//     DOMAIN itself: @*:*.example.org matches @a:chat.example.org and
//     @a:x.y.example.org, not @a:example.org (list both to mean both), not
//     @a:evil-example.org. DOMAIN must be a DNS name.
//   - Either may end in ":PORT" (that port only: example.org:8448) or ":*"
//     (any port or none: example.org:*). Ports compare as numbers.
//
// Wildcards elsewhere in a server ("example.*", "*example.org",
// "ex*.org") are errors, so are malformed hosts, ports other than 1-65535,
// and patterns longer than 255 bytes. Errors name the pattern. A user id
// that does not read @LOCALPART:SERVER with both parts non-empty matches
// no pattern. A trailing dot is not ignored: example.org. is a different
// server name than example.org.
//
// An exact user id is a pattern, so lists of user ids stay valid.
//
// # Aliases
//
// aliases maps a pattern of puppet accounts (a bridge's users) to the user
// they stand for. Before any rule, the sender is replaced by that user, the
// person; every rule, the pairing and the rate limits are about the
// person, and the Decision reports both. An exact alias wins over wildcard
// ones; of overlapping wildcard aliases, the one with the most literal
// characters wins, then the first in byte order. Aliases are not chained.
// An alias makes a puppet as powerful as its person (a global user's
// puppet is a global user): alias only accounts of a bridge you trust,
// on a server you trust. For "members:" entries, the puppet's own
// membership counts as well as the person's.
//
// # The decision
//
// Policy.Decide takes, in order, the first rule that applies:
//
//  1. Global users (global_users patterns): allowed everywhere.
//  2. In a DM (the room is a direct message with the agent), the agent's
//     DM policy (agents.NAME.dm, default dm, default allowlist):
//     open: allowed. allowlist: allowed when an entry of the agent's
//     reply_to admits the person, or, for an agent without reply_to, when
//     the room rules do (in a DM: its inviter, while invite_users still
//     admits them); denied otherwise. pairing: as allowlist, then allowed
//     when an administrator paired the person with the agent, and
//     otherwise denied with reason pairing_required: bot gives the person
//     a one-time code (Store.Issue) an administrator confirms with !pair
//     CODE (Store.Confirm).
//  3. Anywhere else: the room rules (room_permissions,
//     default_room_access, the inviter of a room joined on an invite)
//     must admit the person; then, when the agent has reply_to, one of its
//     entries must admit them.
//
// So room rules say who may talk in a room at all, reply_to which of them
// an agent answers, and the DM policy who may talk to an agent in a DM.
// With no authorization settings beyond the room rules, Decide says what
// the room rules say: today's behaviour.
//
// reply_to entries: a user pattern; "*" (everyone); "room:R" (anyone
// writing in room R); "members:R" (anyone joined to room R, wherever they
// write, a DM included). R is a room id, an alias or a room key of
// config.yaml, resolved when the policy is built (New); an entry whose
// room is unknown matches nobody and is listed by Policy.Unresolved.
//
// # Pairing codes
//
// A code is 8 characters of an alphabet without 0, O, 1 and I (40 random
// bits from crypto/rand), valid for pairing.code_ttl (default 1h), and
// works once. A person has at most one live code per agent: asking again
// returns the same code (fresh false: do not post it again) until it
// expires. At most pairing.max_pending_codes (default 100) codes wait at
// once. Pairings last until Store.Unpair.
//
// # Rate limits
//
// A rate is a token bucket: per_minute messages a minute on average, up to
// burst at once (default: per_minute rounded up). Global limits
// (rate_limits.per_person, .per_room) count every message to an agent;
// an agent's own limits (rate_limits.agents.NAME) count the messages to
// it, besides. A message passes only when every bucket that applies has a
// token, and then takes one from each. Buckets are kept in memory, keyed
// by the person (after aliases) and the room; a bucket that is full again
// is dropped, and at most max_buckets (default 10000) are kept per limit.
// Rate limits are separate from token budgets (usage).
package policy
