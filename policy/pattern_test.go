package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"
)

// patternMatchTests is the table of TestPatternMatch.
var patternMatchTests = []struct {
	pattern string
	user    id.UserID
	want    bool
}{
	// Exact ids.
	{"@alice:example.org", "@alice:example.org", true},
	{"@alice:example.org", "@alice2:example.org", false},
	{"@alice:example.org", "@alic:example.org", false},
	{"@alice:example.org", "@bob:example.org", false},
	{"@alice:example.org", "@alice:example.org.evil.com", false},
	{"@alice:example.org", "@alice:evil-example.org", false},
	{"@alice:example.org", "@alice:sub.example.org", false},
	{"@alice:example.org", "@alice:example.org:8448", false},
	// Localparts are case-sensitive, servers are not.
	{"@alice:example.org", "@Alice:example.org", false},
	{"@Alice:example.org", "@Alice:example.org", true},
	{"@alice:example.org", "@alice:EXAMPLE.org", true},
	{"@alice:Example.ORG", "@alice:example.org", true},
	// Any localpart on exactly one server.
	{"@*:example.org", "@alice:example.org", true},
	{"@*:example.org", "@bob:example.org", true},
	{"@*:example.org", "@alice:evil-example.org", false},
	{"@*:example.org", "@alice:example.org.evil.com", false},
	{"@*:example.org", "@alice:sub.example.org", false},
	{"@*:example.org", "@alice:xexample.org", false},
	{"@*:example.org", "@alice:example.org:8448", false},
	{"@*:example.org", "@x:evil.org:example.org", false},
	{"@*:example.org", "@:example.org", false},
	{"@*:example.org", "@alice:", false},
	{"@*:example.org", "alice:example.org", false},
	{"@*:example.org", "", false},
	{"@*:example.org", "@alice", false},
	// Localpart globs never cross the colon.
	{"@bot-*:*", "@bot-42:example.org", true},
	{"@bot-*:*", "@bot-:example.org", true},
	{"@bot-*:*", "@bot-42:example.org:8448", true},
	{"@bot-*:*", "@robot-42:example.org", false},
	{"@bot-*:*", "@bot:example.org", false},
	{"@bot-*:example.org", "@bot-x:evil.org", false},
	{"@*-bridge:example.org", "@tg-bridge:example.org", true},
	{"@*-bridge:example.org", "@tg-bridge2:example.org", false},
	{"@a*b*c:x.org", "@abc:x.org", true},
	{"@a*b*c:x.org", "@a-b-c:x.org", true},
	{"@a*b*c:x.org", "@acb:x.org", false},
	{"@a*b*c:x.org", "@abcbc:x.org", true},
	{"@a*a:x.org", "@a:x.org", false}, // prefix and suffix may not overlap
	{"@a*a:x.org", "@aa:x.org", true},
	{"@*:*", "@anyone:anywhere.example", true},
	{"@*:*", "@anyone:[::1]:8448", true},
	// Subdomains, explicitly.
	{"@*:*.example.org", "@a:chat.example.org", true},
	{"@*:*.example.org", "@a:x.y.example.org", true},
	{"@*:*.example.org", "@a:CHAT.Example.org", true},
	{"@*:*.example.org", "@a:example.org", false},
	{"@*:*.example.org", "@a:evil-example.org", false},
	{"@*:*.example.org", "@a:.example.org", false},
	{"@*:*.example.org", "@a:chat.example.org.evil.com", false},
	{"@*:*.example.org", "@a:chat.example.org:8448", false},
	{"@*:*.example.org:*", "@a:chat.example.org:8448", true},
	{"@*:*.example.org:*", "@a:chat.example.org", true},
	// Ports.
	{"@*:example.org:8448", "@a:example.org:8448", true},
	{"@*:example.org:8448", "@a:example.org:08448", true},
	{"@*:example.org:8448", "@a:example.org", false},
	{"@*:example.org:8448", "@a:example.org:443", false},
	{"@*:example.org:*", "@a:example.org", true},
	{"@*:example.org:*", "@a:example.org:1", true},
	{"@*:example.org:*", "@a:example.org:", false},
	{"@*:example.org:*", "@a:example.org:x", false},
	{"@*:example.org:*", "@a:evil.example.org:1", false},
	{"@alice:example.org:8448", "@alice:example.org:8448", true},
	{"@alice:example.org:*", "@alice:example.org:8448", true},
	{"@alice:example.org:*", "@bob:example.org:8448", false},
	// IP literals.
	{"@*:10.0.0.1", "@a:10.0.0.1", true},
	{"@*:10.0.0.1", "@a:10.0.0.10", false},
	{"@*:[2001:db8::1]", "@a:[2001:DB8::1]", true},
	{"@*:[2001:db8::1]", "@a:[2001:db8::1]:8448", false},
	{"@*:[2001:db8::1]:8448", "@a:[2001:db8::1]:8448", true},
	{"@*:[2001:db8::1]:*", "@a:[2001:db8::1]", true},
	{"@*:[2001:db8::1]", "@a:[2001:db8::2]", false},
	// A trailing dot is a different server name.
	{"@*:example.org", "@a:example.org.", false},
	// Historical localparts.
	{"@Old_User!:example.org", "@Old_User!:example.org", true},
}

func TestPatternMatch(t *testing.T) {
	for _, tt := range patternMatchTests {
		p, err := ParsePattern(tt.pattern)
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.user); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.user, got, tt.want)
		}
		// A set of that one pattern agrees, whichever index it takes.
		set := NewPatternSet([]Pattern{p})
		if _, got := set.Match(tt.user); got != tt.want {
			t.Errorf("PatternSet{%q}.Match(%q) = %v, want %v", tt.pattern, tt.user, got, tt.want)
		}
	}
}

func TestParsePatternErrors(t *testing.T) {
	tests := []struct {
		pattern, want string
	}{
		{"alice:example.org", `starts with "@"`},
		{"", `starts with "@"`},
		{"@alice", "no server part"},
		{"@:example.org", "empty localpart"},
		{"@**:example.org", `"**"`},
		{"@a**b:example.org", `"**"`},
		{"@alice:", "empty server name"},
		{"@al ice:example.org", "which no Matrix user id may contain"},
		{"@alicé:example.org", "which no Matrix user id may contain"},
		{"@*:example.*", "wildcard server"},
		{"@*:*example.org", "wildcard server"},
		{"@*:ex*ample.org", "wildcard server"},
		{"@*:*.*.example.org", "after \"*.\" comes a DNS name"},
		{"@*:*.", "after \"*.\" comes a DNS name"},
		{"@*:*.[::1]", "after \"*.\" comes a DNS name"},
		{"@*:**", "wildcard server"},
		{"@*:example.org:", "empty port"},
		{"@*:example.org:0", "not a number from 1 to 65535"},
		{"@*:example.org:65536", "not a number from 1 to 65535"},
		{"@*:example.org:84a", "not a number from 1 to 65535"},
		{"@*:example.org:8448:1", "not a number from 1 to 65535"},
		{"@*:exa_mple.org", "not a valid server name"},
		{"@*:example..org", "empty DNS label"},
		{"@*:.example.org", "empty DNS label"},
		{"@*:[::1", "closing bracket"},
		{"@*:[::1]x", "only :PORT may follow"},
		{"@*:" + strings.Repeat("a", 260), "longer than 255 bytes"},
	}
	for _, tt := range tests {
		_, err := ParsePattern(tt.pattern)
		var pe *PatternError
		if !errors.As(err, &pe) {
			t.Errorf("ParsePattern(%q) = %v, want a *PatternError", tt.pattern, err)
			continue
		}
		if pe.Pattern != tt.pattern || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "invalid user pattern") {
			t.Errorf("ParsePattern(%q) = %q, want it to name the pattern and say %q", tt.pattern, err, tt.want)
		}
	}
}

func TestPatternExactAndText(t *testing.T) {
	for s, exact := range map[string]bool{
		"@alice:example.org":      true,
		"@alice:example.org:8448": true,
		"@alice:example.org:*":    false,
		"@*:example.org":          false,
		"@alice:*":                false,
		"@alice:*.example.org":    false,
	} {
		if got := MustPattern(s).IsExact(); got != exact {
			t.Errorf("%q.IsExact() = %v, want %v", s, got, exact)
		}
	}
	var v struct {
		Users []Pattern `yaml:"users"`
	}
	if err := yaml.Unmarshal([]byte("users: ['@*:example.org', '@bob:x.org']"), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Users) != 2 || !v.Users[0].Match("@a:example.org") || v.Users[1].String() != "@bob:x.org" {
		t.Errorf("decoded %v", v.Users)
	}
	if err := yaml.Unmarshal([]byte("users: ['@**:example.org']"), &v); err == nil || !strings.Contains(err.Error(), `"@**:example.org"`) {
		t.Errorf("decoding a bad pattern: %v, want an error naming it", err)
	}
	if (Pattern{}).Match("@a:b.org") {
		t.Error("the zero Pattern matched someone")
	}
}

// A PatternSet answers the lowest index among the matching patterns,
// whichever way (exact map, server map, scan) each is found.
func TestPatternSetFirstMatch(t *testing.T) {
	set := NewPatternSet([]Pattern{
		MustPattern("@bot-*:*"),           // 0
		MustPattern("@carol:example.org"), // 1
		MustPattern("@*:example.org"),     // 2
		MustPattern("@alice:example.org"), // 3
		MustPattern("@*:other.org:*"),     // 4
		MustPattern("@*:*.example.org"),   // 5
		MustPattern("@*:example.org"),     // 6, a duplicate
		{},                                // 7, matches nobody
	})
	tests := []struct {
		user id.UserID
		want int
	}{
		{"@bot-1:example.org", 0},
		{"@carol:example.org", 1},
		{"@carol:EXAMPLE.ORG", 1},
		{"@alice:example.org", 2},
		{"@dave:other.org:8448", 4},
		{"@dave:other.org", 4},
		{"@dave:a.example.org", 5},
		{"@dave:nowhere.org", -1},
		{"not-a-user", -1},
	}
	for _, tt := range tests {
		i, ok := set.Match(tt.user)
		if !ok {
			i = -1
		}
		if i != tt.want {
			t.Errorf("Match(%q) = %d, want %d", tt.user, i, tt.want)
		}
	}
	if set.Len() != 8 || set.Pattern(5).String() != "@*:*.example.org" {
		t.Errorf("Len/Pattern: %d %q", set.Len(), set.Pattern(5))
	}
	var nilSet *PatternSet
	if _, ok := nilSet.Match("@a:b.org"); ok || nilSet.Len() != 0 {
		t.Error("a nil PatternSet matched")
	}
}

// A PatternSet of every pattern of the match table, in several orders,
// finds for every user of the table the first pattern a plain scan finds.
func TestPatternSetAgreesWithScan(t *testing.T) {
	var patterns []Pattern
	for _, tt := range patternMatchTests {
		patterns = append(patterns, MustPattern(tt.pattern))
	}
	patterns = append(patterns, MustPattern("@bot*:example.org"), MustPattern("@*x:*"), MustPattern("@a*:*.b.example.org:*"))
	users := []id.UserID{"@x:y.z", "@botty:example.org", "@a1:c.b.example.org:9", "@zzx:q.org", "@a:b..example.org"}
	for _, tt := range patternMatchTests {
		users = append(users, tt.user)
	}
	for round := range 3 {
		set := NewPatternSet(patterns)
		for _, u := range users {
			want := -1
			for i, p := range patterns {
				if p.Match(u) {
					want = i
					break
				}
			}
			got, ok := set.Match(u)
			if !ok {
				got = -1
			}
			if got != want {
				t.Errorf("round %d: Match(%q) = %d, a scan finds %d", round, u, got, want)
			}
		}
		slices.Reverse(patterns)
		if round == 1 {
			patterns = append(patterns[len(patterns)/2:], patterns[:len(patterns)/2]...)
		}
	}
}

func TestNilPatternSet(t *testing.T) {
	var nilSet *PatternSet
	if _, ok := nilSet.Match("@a:b.org"); ok || nilSet.Len() != 0 {
		t.Error("a nil PatternSet matched")
	}
}
