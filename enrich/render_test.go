package enrich

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// escape returns s escaped the way the renderer writes it.
func escape(s string) string {
	var b strings.Builder
	b.Grow(escapedLen(s))
	writeEscaped(&b, s)
	return b.String()
}

func TestEscape(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "empty", in: "", want: ""},
		{name: "plain", in: "nothing to do here", want: "nothing to do here"},
		{name: "ampersand", in: "a&b", want: "a&amp;b"},
		{name: "less than", in: "a<b", want: "a&lt;b"},
		{name: "greater than", in: "a>b", want: "a&gt;b"},
		{name: "double quote", in: `a"b`, want: "a&quot;b"},
		{name: "single quote", in: "a'b", want: "a&#x27;b"},
		{name: "all adjacent", in: `&<>"'`, want: "&amp;&lt;&gt;&quot;&#x27;"},
		{name: "at both ends", in: "<x>", want: "&lt;x&gt;"},
		{name: "entity is escaped again", in: "&amp;", want: "&amp;amp;"},
		{name: "unicode untouched", in: "東京 🌧️ e\u0301", want: "東京 🌧️ e\u0301"},
		{name: "controls untouched", in: "\x00\t\r\n\x7f", want: "\x00\t\r\n\x7f"},
		{name: "invalid utf8 untouched", in: "\xff<\xfe", want: "\xff&lt;\xfe"},
		{name: "other punctuation untouched", in: "`=/;#%", want: "`=/;#%"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := escape(tt.in); got != tt.want {
				t.Errorf("escape(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := escapedLen(tt.in); got != len(tt.want) {
				t.Errorf("escapedLen(%q) = %d, want %d", tt.in, got, len(tt.want))
			}
		})
	}
}

func TestRenderMessage(t *testing.T) {
	tests := []struct {
		name  string
		items []hooks.EnrichmentItem
		want  string
	}{
		{name: "nil", items: nil, want: ""},
		{name: "empty", items: []hooks.EnrichmentItem{}, want: ""},
		{
			name:  "one item",
			items: []hooks.EnrichmentItem{{Key: "k", Text: "t", CachePolicy: hooks.Stable}},
			want: "<hookroom_message_context>\n" +
				"<item key=\"k\" cache_policy=\"stable\">\nt\n</item>\n" +
				"</hookroom_message_context>",
		},
		{
			name:  "empty policy is volatile",
			items: []hooks.EnrichmentItem{{Key: "k", Text: "t"}},
			want: "<hookroom_message_context>\n" +
				"<item key=\"k\" cache_policy=\"volatile\">\nt\n</item>\n" +
				"</hookroom_message_context>",
		},
		{
			name: "collector order, no sorting",
			items: []hooks.EnrichmentItem{
				{Key: "z", Text: "1", CachePolicy: hooks.Volatile},
				{Key: "a", Text: "2", CachePolicy: hooks.Stable},
			},
			want: "<hookroom_message_context>\n" +
				"<item key=\"z\" cache_policy=\"volatile\">\n1\n</item>\n" +
				"<item key=\"a\" cache_policy=\"stable\">\n2\n</item>\n" +
				"</hookroom_message_context>",
		},
		{
			name: "keeps empty and reserved keys and transient items",
			items: []hooks.EnrichmentItem{
				{Key: "", Text: "1"},
				{Key: KeyMatrixMessageTarget, Text: "2", Transient: true},
			},
			want: "<hookroom_message_context>\n" +
				"<item key=\"\" cache_policy=\"volatile\">\n1\n</item>\n" +
				"<item key=\"matrix_message_target\" cache_policy=\"volatile\">\n2\n</item>\n" +
				"</hookroom_message_context>",
		},
		{
			name:  "escapes key policy and text",
			items: []hooks.EnrichmentItem{{Key: `<k>`, Text: `"t"`, CachePolicy: "'p'"}},
			want: "<hookroom_message_context>\n" +
				"<item key=\"&lt;k&gt;\" cache_policy=\"&#x27;p&#x27;\">\n&quot;t&quot;\n</item>\n" +
				"</hookroom_message_context>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RenderMessage(tt.items); got != tt.want {
				t.Errorf("RenderMessage() =\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestRenderSystem(t *testing.T) {
	tests := []struct {
		name  string
		items []hooks.EnrichmentItem
		want  []string // texts in rendered order
	}{
		{name: "nil", items: nil, want: nil},
		{
			name: "stable first then volatile, each by key",
			items: []hooks.EnrichmentItem{
				{Key: "b", Text: "vb", CachePolicy: hooks.Volatile},
				{Key: "c", Text: "sc", CachePolicy: hooks.Stable},
				{Key: "a", Text: "va", CachePolicy: hooks.Volatile},
				{Key: "d", Text: "sd", CachePolicy: hooks.Stable},
			},
			want: []string{"sc", "sd", "va", "vb"},
		},
		{
			name: "ties keep collector order",
			items: []hooks.EnrichmentItem{
				{Key: "k", Text: "v1"},
				{Key: "k", Text: "s1", CachePolicy: hooks.Stable},
				{Key: "k", Text: "v2", CachePolicy: hooks.Volatile},
				{Key: "k", Text: "s2", CachePolicy: hooks.Stable},
				{Key: "k", Text: "v3", CachePolicy: "other"},
			},
			want: []string{"s1", "s2", "v1", "v2", "v3"},
		},
		{
			name: "transient flag does not matter",
			items: []hooks.EnrichmentItem{
				{Key: "b", Text: "b", Transient: true},
				{Key: "a", Text: "a"},
			},
			want: []string{"a", "b"},
		},
		{
			name: "byte order is code point order",
			items: []hooks.EnrichmentItem{
				{Key: "\U0001F600", Text: "astral"},
				{Key: "\uffff", Text: "bmp-last"},
				{Key: "é", Text: "latin1"},
				{Key: "Z", Text: "ascii"},
			},
			want: []string{"ascii", "latin1", "bmp-last", "astral"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.items)
			got := RenderSystem(in)
			if !slices.Equal(in, tt.items) {
				t.Errorf("RenderSystem modified its input: %v", in)
			}
			if tt.want == nil {
				if got != "" {
					t.Errorf("RenderSystem() = %q, want empty", got)
				}
				return
			}
			parsed, err := parseBlock(got, systemOpen, systemClose)
			if err != nil {
				t.Fatalf("RenderSystem() output does not parse: %v\n%s", err, got)
			}
			var texts []string
			for _, it := range parsed {
				texts = append(texts, it.Text)
			}
			if !slices.Equal(texts, tt.want) {
				t.Errorf("order = %q, want %q", texts, tt.want)
			}
		})
	}
}

// TestRenderSystemMany covers more items than the stack buffer used for the
// ordering, against an independent stable sort.
func TestRenderSystemMany(t *testing.T) {
	for _, n := range []int{orderBufLen - 1, orderBufLen, orderBufLen + 1, 5 * orderBufLen} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			items := make([]hooks.EnrichmentItem, n)
			for i := range items {
				items[i] = hooks.EnrichmentItem{
					Key:  fmt.Sprintf("key%02d", (i*7)%13),
					Text: fmt.Sprint(i),
				}
				if i%3 == 0 {
					items[i].CachePolicy = hooks.Stable
				}
			}
			want := slices.Clone(items)
			slices.SortStableFunc(want, func(a, b hooks.EnrichmentItem) int {
				ra, rb := 1, 1
				if a.CachePolicy == hooks.Stable {
					ra = 0
				}
				if b.CachePolicy == hooks.Stable {
					rb = 0
				}
				if ra != rb {
					return ra - rb
				}
				return strings.Compare(a.Key, b.Key)
			})
			got, err := parseBlock(RenderSystem(items), systemOpen, systemClose)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				want[i].CachePolicy = hooks.CachePolicy(policyText(want[i].CachePolicy))
			}
			if !slices.Equal(got, want) {
				t.Errorf("got order %v\nwant %v", got, want)
			}
		})
	}
}

func TestRenderTransient(t *testing.T) {
	tests := []struct {
		name  string
		parts []string
		want  string
	}{
		{name: "no parts", parts: nil, want: ""},
		{name: "only empty parts", parts: []string{"", ""}, want: ""},
		{
			name:  "one part",
			parts: []string{"a"},
			want:  "<hookroom_transient_context>\na\n</hookroom_transient_context>",
		},
		{
			name:  "empty parts skipped, others joined by a blank line",
			parts: []string{"", "a", "", "b\n", ""},
			want:  "<hookroom_transient_context>\na\n\nb\n\n</hookroom_transient_context>",
		},
		{
			name:  "whitespace parts kept verbatim",
			parts: []string{" ", "<raw & unescaped>"},
			want:  "<hookroom_transient_context>\n \n\n<raw & unescaped>\n</hookroom_transient_context>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RenderTransient(tt.parts...); got != tt.want {
				t.Errorf("RenderTransient(%q) = %q, want %q", tt.parts, got, tt.want)
			}
		})
	}
}

// parseBlock strictly parses a block rendered by this package and returns its
// items with keys, policies and texts unescaped. Transient is always false.
// It fails on anything the renderer would never produce: a missing tag, an
// unescaped special character inside a value, an unknown entity.
func parseBlock(s, open, close string) ([]hooks.EnrichmentItem, error) {
	body, ok := strings.CutPrefix(s, open)
	if !ok {
		return nil, fmt.Errorf("missing opening tag %q", open)
	}
	body, ok = strings.CutSuffix(body, close)
	if !ok {
		return nil, fmt.Errorf("missing closing tag %q", close)
	}
	var items []hooks.EnrichmentItem
	for {
		var it hooks.EnrichmentItem
		var raw string
		var err error
		if body, ok = strings.CutPrefix(body, itemKeyOpen); !ok {
			return nil, fmt.Errorf("item %d: missing %q", len(items), itemKeyOpen)
		}
		if raw, body, ok = strings.Cut(body, itemPolicyOpen); !ok {
			return nil, fmt.Errorf("item %d: missing %q", len(items), itemPolicyOpen)
		}
		if it.Key, err = unescape(raw); err != nil {
			return nil, fmt.Errorf("item %d key: %w", len(items), err)
		}
		if raw, body, ok = strings.Cut(body, itemTextOpen); !ok {
			return nil, fmt.Errorf("item %d: missing %q", len(items), itemTextOpen)
		}
		var policy string
		if policy, err = unescape(raw); err != nil {
			return nil, fmt.Errorf("item %d policy: %w", len(items), err)
		}
		it.CachePolicy = hooks.CachePolicy(policy)
		if raw, body, ok = strings.Cut(body, itemClose); !ok {
			return nil, fmt.Errorf("item %d: missing %q", len(items), itemClose)
		}
		if it.Text, err = unescape(raw); err != nil {
			return nil, fmt.Errorf("item %d text: %w", len(items), err)
		}
		items = append(items, it)
		if body == "" {
			return items, nil
		}
		if body, ok = strings.CutPrefix(body, itemSep); !ok {
			return nil, fmt.Errorf("item %d: not followed by a newline: %q", len(items)-1, body)
		}
	}
}

// unescape reverses escape and rejects raw special characters and entities
// the renderer never writes.
func unescape(s string) (string, error) {
	if i := strings.IndexAny(s, `<>"'`); i >= 0 {
		return "", fmt.Errorf("raw %q at %d in %q", s[i], i, s)
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(s, '&')
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		s = s[i:]
		matched := false
		for _, e := range []struct{ entity, char string }{
			{escAmp, "&"}, {escLt, "<"}, {escGt, ">"}, {escQuot, `"`}, {escApos, "'"},
		} {
			if rest, ok := strings.CutPrefix(s, e.entity); ok {
				b.WriteString(e.char)
				s = rest
				matched = true
				break
			}
		}
		if !matched {
			return "", fmt.Errorf("bare '&' in %q", s)
		}
	}
}
