package policy

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/id"
)

// Pattern names a set of Matrix users by their user id: one user
// ("@alice:example.org"), or many, with "*" in the localpart and a
// wildcard server ("@*:example.org", "@bot-*:*", "@*:*.example.org").
// ParsePattern documents the syntax; doc.go the matching rules. The zero
// Pattern matches nobody.
type Pattern struct {
	raw    string
	local  glob
	server serverPattern
	ok     bool
}

// PatternError says why a pattern is malformed; it names the pattern.
type PatternError struct {
	Pattern string
	Reason  string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("invalid user pattern %q: %s", e.Pattern, e.Reason)
}

// maxIDLength is the longest user id the spec allows, in bytes.
const maxIDLength = 255

// ParsePattern compiles s, which must read "@LOCALPART:SERVER":
//
//   - LOCALPART is a literal localpart, in which each "*" matches any run
//     of characters (possibly empty); "**" is refused, and so is an empty
//     localpart (write "*" for any localpart).
//   - SERVER is "*" (every server, with or without a port), a host
//     ("example.org", "1.2.3.4", "[::1]"), or "*." followed by a DNS name
//     (every subdomain of that name, not the name itself); either of the
//     last two may end in ":PORT" (that port only) or ":*" (any port or
//     none). Without a port part, only server names without a port match.
//
// The error is a *PatternError naming s.
func ParsePattern(s string) (Pattern, error) {
	fail := func(format string, args ...any) (Pattern, error) {
		return Pattern{}, &PatternError{Pattern: s, Reason: fmt.Sprintf(format, args...)}
	}
	if len(s) > maxIDLength {
		return fail("longer than %d bytes, the longest user id Matrix allows", maxIDLength)
	}
	rest, ok := strings.CutPrefix(s, "@")
	if !ok {
		return fail(`a user pattern starts with "@" (e.g. @alice:example.org or @*:example.org)`)
	}
	local, server, ok := strings.Cut(rest, ":")
	if !ok {
		return fail(`no server part: write @LOCALPART:SERVER (e.g. @alice:example.org, @*:*)`)
	}
	if local == "" {
		return fail(`empty localpart: write "*" for any localpart (@*:SERVER)`)
	}
	if strings.Contains(local, "**") {
		return fail(`"**" in the localpart: a single "*" already matches any run of characters`)
	}
	for i := 0; i < len(local); i++ {
		if c := local[i]; c < 0x21 || c > 0x7e {
			return fail("the localpart holds %q, which no Matrix user id may contain", rune(c))
		}
	}
	sp, err := parseServerPattern(server)
	if err != nil {
		return fail("%v", err)
	}
	return Pattern{raw: s, local: compileGlob(local), server: sp, ok: true}, nil
}

// MustPattern is ParsePattern for patterns known to be valid (tests,
// constants); it panics on an error.
func MustPattern(s string) Pattern {
	p, err := ParsePattern(s)
	if err != nil {
		panic(err)
	}
	return p
}

// String returns the pattern as written.
func (p Pattern) String() string { return p.raw }

// IsExact reports whether p names exactly one user id (no wildcard).
func (p Pattern) IsExact() bool {
	return p.ok && p.local.exact() && p.server.kind == serverExact && p.server.port != portAny
}

// MarshalText returns the pattern as written.
func (p Pattern) MarshalText() ([]byte, error) { return []byte(p.raw), nil }

// UnmarshalText parses text with ParsePattern, so a Pattern can be decoded
// from YAML or JSON directly.
func (p *Pattern) UnmarshalText(text []byte) error {
	parsed, err := ParsePattern(string(text))
	if err != nil {
		return err
	}
	*p = parsed
	return nil
}

// Match reports whether user is named by p. A user id that does not read
// "@LOCALPART:SERVER" with a non-empty localpart and server matches no
// pattern.
func (p Pattern) Match(user id.UserID) bool {
	if !p.ok {
		return false
	}
	local, server, ok := splitUserID(user)
	return ok && p.local.match(local) && p.server.match(server)
}

// literals counts the characters of p that are not wildcards: the more, the
// more specific p is (aliases use it to rank overlapping patterns).
func (p Pattern) literals() int {
	return len(p.raw) - strings.Count(p.raw, "*")
}

// splitUserID splits a user id at its first colon (localparts never hold
// one) into a non-empty localpart and server name.
func splitUserID(user id.UserID) (local, server string, ok bool) {
	s := string(user)
	if len(s) < 4 || s[0] != '@' {
		return "", "", false
	}
	i := strings.IndexByte(s, ':')
	if i < 2 || i == len(s)-1 {
		return "", "", false
	}
	return s[1:i], s[i+1:], true
}

// glob is a localpart pattern: literal segments between "*"s, compared
// byte for byte (localparts are case-sensitive).
type glob struct {
	parts []string // the literal runs; len(parts)-1 stars separate them
}

func compileGlob(s string) glob { return glob{parts: strings.Split(s, "*")} }

func (g glob) exact() bool { return len(g.parts) == 1 }

// match reports whether s matches the glob. Each "*" matches any run of
// bytes; the first and last literal runs are anchored. Greedy leftmost
// matching of the middle runs is exact for patterns whose only wildcard is
// "*", so there is no backtracking.
func (g glob) match(s string) bool {
	if len(g.parts) == 1 {
		return s == g.parts[0]
	}
	first, last := g.parts[0], g.parts[len(g.parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, mid := range g.parts[1 : len(g.parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return true
}

type serverKind uint8

const (
	serverAny       serverKind = iota // "*"
	serverExact                       // "example.org", "[::1]"
	serverSubdomain                   // "*.example.org"
)

// Port matching of a server pattern.
const (
	portNone = -1 // no port part: only server names without a port
	portAny  = -2 // ":*": any port or none
)

// serverPattern is the part of a Pattern after the first colon.
type serverPattern struct {
	kind serverKind
	host string // lower case; for serverSubdomain the suffix with its dot (".example.org")
	port int    // a port number, portNone or portAny
}

var errServerWildcard = errors.New(`a wildcard server is "*" (any server) or "*.DOMAIN" (every subdomain of DOMAIN); "*" may appear nowhere else in it`)

func parseServerPattern(s string) (serverPattern, error) {
	switch {
	case s == "":
		return serverPattern{}, errors.New("empty server name")
	case s == "*":
		return serverPattern{kind: serverAny, port: portAny}, nil
	case strings.HasPrefix(s, "*.["):
		return serverPattern{}, fmt.Errorf(`%q: after "*." comes a DNS name (e.g. *.example.org)`, s)
	}
	host, port, err := splitServerPattern(s)
	if err != nil {
		return serverPattern{}, err
	}
	sp := serverPattern{kind: serverExact, port: port}
	if suffix, ok := strings.CutPrefix(host, "*."); ok {
		sp.kind = serverSubdomain
		host = suffix
		if parsed := id.ParseServerName(host); parsed == nil || parsed.Type != id.ServerNameDNS {
			return serverPattern{}, fmt.Errorf(`"*.%s": after "*." comes a DNS name (e.g. *.example.org)`, host)
		}
	}
	if strings.Contains(host, "*") {
		return serverPattern{}, errServerWildcard
	}
	if !id.ValidateServerName(host) || strings.Contains(host, ":") && !strings.HasPrefix(host, "[") {
		return serverPattern{}, fmt.Errorf("%q is not a valid server name (a DNS name, an IPv4 address or a bracketed IPv6 address)", host)
	}
	if strings.HasPrefix(host, ".") || strings.HasSuffix(host, ".") || strings.Contains(host, "..") {
		return serverPattern{}, fmt.Errorf("%q is not a valid server name: empty DNS label", host)
	}
	sp.host = strings.ToLower(host)
	if sp.kind == serverSubdomain {
		sp.host = "." + sp.host
	}
	return sp, nil
}

// splitServerPattern splits a server pattern into its host and port part.
func splitServerPattern(s string) (host string, port int, err error) {
	host, portText := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("%q: an IPv6 address needs its closing bracket", s)
		}
		host, portText = s[:end+1], s[end+1:]
		if portText != "" && portText[0] != ':' {
			return "", 0, fmt.Errorf("%q: only :PORT may follow an IPv6 address", s)
		}
		portText = strings.TrimPrefix(portText, ":")
		if portText == "" && strings.HasSuffix(s, ":") {
			return "", 0, fmt.Errorf("%q: empty port", s)
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 {
		host, portText = s[:i], s[i+1:]
		if portText == "" {
			return "", 0, fmt.Errorf("%q: empty port", s)
		}
	}
	switch portText {
	case "":
		return host, portNone, nil
	case "*":
		return host, portAny, nil
	}
	n, err := parsePort(portText)
	if err != nil {
		return "", 0, fmt.Errorf("%q: port %q is not a number from 1 to 65535 (or * for any port)", s, portText)
	}
	return host, n, nil
}

// parsePort parses a port of a server name: 1 to 5 digits, 1 to 65535.
func parsePort(s string) (int, error) {
	if len(s) == 0 || len(s) > 5 {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, strconv.ErrRange
	}
	return n, nil
}

// splitServer splits a user's server name into its lower-case host and its
// port (portNone without one); ok is false for a malformed port.
func splitServer(server string) (host string, port int, ok bool) {
	host, portText := server, ""
	if strings.HasPrefix(server, "[") {
		end := strings.IndexByte(server, ']')
		if end < 0 {
			return "", 0, false
		}
		host, portText = server[:end+1], server[end+1:]
		if portText != "" {
			if portText[0] != ':' {
				return "", 0, false
			}
			portText = portText[1:]
			if portText == "" {
				return "", 0, false
			}
		}
	} else if i := strings.IndexByte(server, ':'); i >= 0 {
		host, portText = server[:i], server[i+1:]
		if portText == "" {
			return "", 0, false
		}
	}
	host = lowerASCII(host)
	if portText == "" {
		return host, portNone, true
	}
	n, err := parsePort(portText)
	if err != nil {
		return "", 0, false
	}
	return host, n, true
}

func (sp serverPattern) match(server string) bool {
	if sp.kind == serverAny {
		return true
	}
	host, port, ok := splitServer(server)
	if !ok {
		return false
	}
	if sp.port != portAny && sp.port != port {
		return false
	}
	if sp.kind == serverExact {
		return host == sp.host
	}
	// A subdomain: at least one non-empty label before the suffix, so
	// "*.example.org" matches "a.example.org" but neither "example.org"
	// nor "evil-example.org" nor ".example.org".
	return len(host) > len(sp.host) && strings.HasSuffix(host, sp.host) && host[len(host)-len(sp.host)-1] != '.'
}

// lowerASCII lower-cases the ASCII letters of s (server names are ASCII;
// anything else is left alone, and then matches no valid pattern), without
// allocating when s is lower case already.
func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; 'A' <= c && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if 'A' <= b[j] && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}

// PatternSet is a list of patterns compiled for fast matching: a user is
// split once, exact user ids and whole-server patterns ("@*:example.org")
// are looked up in maps, the other patterns are grouped by their server
// (one host, the subdomains of one domain) and, for any server, by the
// first character of their localpart, so only the few that may match are
// tried. It is safe for concurrent use once built.
type PatternSet struct {
	patterns []Pattern
	exact    map[userKey]int   // exact user ids → lowest index
	servers  map[hostKey]int   // "@*:SERVER" patterns → lowest index
	byHost   map[hostKey][]int // other patterns on one host → indexes, ascending
	bySuffix map[hostKey][]int // other patterns on subdomains, by ".domain" → indexes
	byFirst  [256][]int        // other patterns on any server, by the first byte of their localpart
	anyLocal []int             // patterns on any server whose localpart starts with "*"
}

// hostKey is a lower-case host (or ".domain" suffix) and a port, portNone
// or portAny; userKey adds a localpart.
type hostKey struct {
	host string
	port int
}

type userKey struct {
	local string
	hostKey
}

// NewPatternSet compiles patterns (zero Patterns among them match nobody).
func NewPatternSet(patterns []Pattern) *PatternSet {
	s := &PatternSet{
		patterns: slices.Clone(patterns), exact: map[userKey]int{}, servers: map[hostKey]int{},
		byHost: map[hostKey][]int{}, bySuffix: map[hostKey][]int{},
	}
	for i, p := range patterns {
		hk := hostKey{p.server.host, p.server.port}
		switch {
		case !p.ok:
		case p.IsExact():
			key := userKey{p.local.parts[0], hk}
			if _, dup := s.exact[key]; !dup {
				s.exact[key] = i
			}
		case len(p.local.parts) == 2 && p.local.parts[0] == "" && p.local.parts[1] == "" && p.server.kind == serverExact:
			if _, dup := s.servers[hk]; !dup {
				s.servers[hk] = i
			}
		case p.server.kind == serverExact:
			s.byHost[hk] = append(s.byHost[hk], i)
		case p.server.kind == serverSubdomain:
			s.bySuffix[hk] = append(s.bySuffix[hk], i)
		case p.local.parts[0] == "":
			s.anyLocal = append(s.anyLocal, i)
		default:
			c := p.local.parts[0][0]
			s.byFirst[c] = append(s.byFirst[c], i)
		}
	}
	return s
}

// Len returns the number of patterns in s.
func (s *PatternSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.patterns)
}

// Pattern returns the i-th pattern of s.
func (s *PatternSet) Pattern(i int) Pattern { return s.patterns[i] }

// Match returns the index of the first pattern of s that names user, and
// whether there is one. A nil PatternSet matches nobody.
func (s *PatternSet) Match(user id.UserID) (int, bool) {
	if s == nil || len(s.patterns) == 0 {
		return 0, false
	}
	local, server, ok := splitUserID(user)
	if !ok {
		return 0, false
	}
	best := -1
	if host, port, ok := splitServer(server); ok {
		for _, pk := range [2]int{port, portAny} {
			hk := hostKey{host, pk}
			if i, hit := s.exact[userKey{local, hk}]; hit && (best < 0 || i < best) {
				best = i
			}
			if i, hit := s.servers[hk]; hit && (best < 0 || i < best) {
				best = i
			}
			best = s.scan(s.byHost[hk], local, server, best)
			if len(s.bySuffix) > 0 {
				// Every proper suffix of the host that starts at a dot.
				for j := strings.IndexByte(host, '.'); j > 0 && j < len(host)-1; {
					best = s.scan(s.bySuffix[hostKey{host[j:], pk}], local, server, best)
					next := strings.IndexByte(host[j+1:], '.')
					if next < 0 {
						break
					}
					j += 1 + next
				}
			}
		}
	}
	best = s.scan(s.byFirst[local[0]], local, server, best)
	best = s.scan(s.anyLocal, local, server, best)
	return best, best >= 0
}

// scan returns the lower of best (-1: none yet) and the first index of the
// ascending list whose pattern matches.
func (s *PatternSet) scan(list []int, local, server string, best int) int {
	for _, i := range list {
		if best >= 0 && i > best {
			return best
		}
		p := s.patterns[i]
		if p.local.match(local) && p.server.match(server) {
			return i
		}
	}
	return best
}
