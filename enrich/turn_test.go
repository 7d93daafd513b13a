package enrich

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookroom/hookroom/hooks"
)

func TestBuild(t *testing.T) {
	persisted := hooks.EnrichmentItem{Key: "location", Text: "Home", CachePolicy: hooks.Stable}
	persisted2 := hooks.EnrichmentItem{Key: "calendar", Text: "10:00"}
	transient := hooks.EnrichmentItem{Key: "weather", Text: "rain", Transient: true}
	reserved := hooks.EnrichmentItem{Key: KeyMatrixMessageTarget, Text: "spoofed"}
	reservedTransient := hooks.EnrichmentItem{Key: KeyMatrixMessageTarget, Text: "spoofed", Transient: true}
	noKey := hooks.EnrichmentItem{Text: "no key"}
	sysStable := hooks.EnrichmentItem{Key: "tags", Text: "backend", CachePolicy: hooks.Stable}
	sysVolatile := hooks.EnrichmentItem{Key: "focus", Text: "triage", Transient: true}

	tests := []struct {
		name    string
		user    string
		message []hooks.EnrichmentItem
		system  []hooks.EnrichmentItem
		extra   []string
		want    Turn
	}{
		{
			name: "nothing collected leaves the user text untouched",
			user: "hello  \n",
			want: Turn{Prompt: "hello  \n"},
		},
		{
			name:    "persisted items appended after trimmed text",
			user:    "hello  \n",
			message: []hooks.EnrichmentItem{persisted, persisted2},
			want:    Turn{Prompt: "hello\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted, persisted2})},
		},
		{
			name:    "empty user text still gets the separator",
			message: []hooks.EnrichmentItem{persisted},
			want:    Turn{Prompt: "\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted})},
		},
		{
			name:    "whitespace-only user text trims to nothing",
			user:    " \n\t",
			message: []hooks.EnrichmentItem{persisted},
			want:    Turn{Prompt: "\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted})},
		},
		{
			name:    "transient items stay out of the prompt",
			user:    "hello  ",
			message: []hooks.EnrichmentItem{transient},
			want: Turn{
				Prompt:    "hello  ",
				Transient: RenderTransient(RenderMessage([]hooks.EnrichmentItem{transient})),
			},
		},
		{
			name:    "split keeps collector order on both sides",
			user:    "q",
			message: []hooks.EnrichmentItem{persisted, transient, persisted2, transient},
			extra:   []string{"", "memory"},
			want: Turn{
				Prompt:    "q\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted, persisted2}),
				Transient: RenderTransient(RenderMessage([]hooks.EnrichmentItem{transient, transient}), "memory"),
			},
		},
		{
			name:  "extra transient parts alone",
			user:  "q",
			extra: []string{"a", "", "b"},
			want:  Turn{Prompt: "q", Transient: RenderTransient("a", "b")},
		},
		{
			name:    "reserved and empty keys are dropped everywhere",
			user:    "q ",
			message: []hooks.EnrichmentItem{reserved, noKey, reservedTransient},
			system:  []hooks.EnrichmentItem{reserved, noKey},
			want:    Turn{Prompt: "q "},
		},
		{
			name:    "dropping keeps the remaining items",
			user:    "q",
			message: []hooks.EnrichmentItem{reserved, persisted, noKey, reservedTransient, transient},
			system:  []hooks.EnrichmentItem{noKey, sysVolatile, reserved, sysStable},
			want: Turn{
				Prompt:    "q\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted}),
				Transient: RenderTransient(RenderMessage([]hooks.EnrichmentItem{transient})),
				System:    RenderSystem([]hooks.EnrichmentItem{sysStable, sysVolatile}),
				SystemStable: len(RenderSystem([]hooks.EnrichmentItem{sysStable, sysVolatile})) -
					len("\n<item key=\"focus\" cache_policy=\"volatile\">\ntriage\n</item>\n</hookroom_system_context>"),
			},
		},
		{
			name:   "system items ignore the transient flag",
			user:   "q",
			system: []hooks.EnrichmentItem{sysVolatile, sysStable},
			want: Turn{
				Prompt: "q",
				System: "<hookroom_system_context>\n" +
					"<item key=\"tags\" cache_policy=\"stable\">\nbackend\n</item>\n" +
					"<item key=\"focus\" cache_policy=\"volatile\">\ntriage\n</item>\n" +
					"</hookroom_system_context>",
				SystemStable: len("<hookroom_system_context>\n" +
					"<item key=\"tags\" cache_policy=\"stable\">\nbackend\n</item>"),
			},
		},
		{
			name:    "leading whitespace and inner newlines are kept",
			user:    "\n  line one\n\nline two\n\n",
			message: []hooks.EnrichmentItem{persisted},
			want:    Turn{Prompt: "\n  line one\n\nline two\n\n" + RenderMessage([]hooks.EnrichmentItem{persisted})},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, sys := slices.Clone(tt.message), slices.Clone(tt.system)
			got := Build(tt.user, msg, sys, tt.extra...)
			if got != tt.want {
				t.Errorf("Build() =\n%#v\nwant\n%#v", got, tt.want)
			}
			if !slices.Equal(msg, tt.message) || !slices.Equal(sys, tt.system) {
				t.Error("Build modified its input")
			}
			if again := Build(tt.user, tt.message, tt.system, tt.extra...); again != got {
				t.Error("Build is not deterministic")
			}
		})
	}
}

// pythonSpace lists every code point for which Python 3.11's str.isspace()
// is true (computed with
// [hex(c) for c in range(sys.maxunicode+1) if chr(c).isspace()]).
var pythonSpace = []rune{
	0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
	0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
}

func TestIsPySpace(t *testing.T) {
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if got, want := isPySpace(r), slices.Contains(pythonSpace, r); got != want {
			t.Errorf("isPySpace(%U) = %v, want %v", r, got, want)
		}
	}
}

func TestBuildTrimsLikePythonRstrip(t *testing.T) {
	item := []hooks.EnrichmentItem{{Key: "k", Text: "v"}}
	block := RenderMessage(item)
	for _, r := range pythonSpace {
		user := "text" + string(r) + " " + string(r)
		if got := Build(user, item, nil).Prompt; got != "text\n\n"+block {
			t.Errorf("trailing %U not trimmed: %q", r, got)
		}
	}
	for _, tail := range []string{"\u200b", "\ufeff", "\xff", "x", "\u180e"} {
		user := "text " + tail
		if got := Build(user, item, nil).Prompt; !strings.HasPrefix(got, user+"\n\n") {
			t.Errorf("trailing %q was trimmed: %q", tail, got)
		}
	}
}

func TestReservedKeys(t *testing.T) {
	keys := ReservedKeys()
	if !slices.Contains(keys, KeyMatrixMessageTarget) {
		t.Fatalf("ReservedKeys() = %q, want it to contain %q", keys, KeyMatrixMessageTarget)
	}
	for _, k := range keys {
		if !IsReserved(k) {
			t.Errorf("IsReserved(%q) = false for a reserved key", k)
		}
	}
	keys[0] = "changed"
	if !slices.Contains(ReservedKeys(), KeyMatrixMessageTarget) {
		t.Error("mutating the returned slice changed ReservedKeys")
	}
	for _, k := range []string{"", "matrix_message_target ", "Matrix_Message_Target", "weather"} {
		if IsReserved(k) {
			t.Errorf("IsReserved(%q) = true", k)
		}
	}
}

// SystemStable covers exactly the stable items: cut there and closed, the
// block is what the stable items alone render; the volatile items do not
// move it.
func TestSystemStable(t *testing.T) {
	stableA := hooks.EnrichmentItem{Key: "a", Text: "alpha", CachePolicy: hooks.Stable}
	stableZ := hooks.EnrichmentItem{Key: "z", Text: "zulu", CachePolicy: hooks.Stable}
	volatile1 := hooks.EnrichmentItem{Key: "b", Text: "now 1", CachePolicy: hooks.Volatile}
	volatile2 := hooks.EnrichmentItem{Key: "c", Text: "now 2 with more text"}
	tests := []struct {
		name   string
		system []hooks.EnrichmentItem
		stable []hooks.EnrichmentItem
	}{
		{name: "nothing collected"},
		{name: "only volatile items", system: []hooks.EnrichmentItem{volatile1, volatile2}},
		{name: "only stable items", system: []hooks.EnrichmentItem{stableZ, stableA}, stable: []hooks.EnrichmentItem{stableA, stableZ}},
		{name: "mixed", system: []hooks.EnrichmentItem{volatile2, stableZ, volatile1, stableA}, stable: []hooks.EnrichmentItem{stableA, stableZ}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			turn := Build("q", nil, tc.system)
			if len(tc.stable) == 0 {
				if turn.SystemStable != 0 {
					t.Fatalf("SystemStable = %d without stable items", turn.SystemStable)
				}
				return
			}
			want := RenderSystem(tc.stable)
			got := turn.System[:turn.SystemStable]
			if !strings.HasSuffix(got, systemClose) {
				got += systemClose
			}
			if got != want {
				t.Errorf("stable prefix closed = %q, want %q", got, want)
			}
			// Other volatile items leave the prefix unchanged (up to the
			// closing tag, which follows the volatile items).
			other := Build("q", nil, append(slices.Clone(tc.stable), hooks.EnrichmentItem{Key: "d", Text: "different"}))
			if a, b := other.System[:other.SystemStable], strings.TrimSuffix(want, systemClose); a != b {
				t.Errorf("with another volatile item the stable prefix is %q, want %q", a, b)
			}
		})
	}
}
