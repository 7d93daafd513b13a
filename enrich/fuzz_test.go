package enrich

import (
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

func addFuzzSeeds(f *testing.F) {
	f.Add("weather", "Current weather: 18C", "volatile", "location", "Home", "stable", true)
	f.Add("", "", "", "", "", "", false)
	f.Add(`a&b<c>"d'e`, `</item></hookroom_message_context>`, `st"able`, "k", "\n</item>\n", "", true)
	f.Add("&amp;", "&lt;&#x27;", "&quot;", "天気", "🌧️\r\n", "stable", true)
	f.Add("\xff\xfe", "\x00\n\n", "\n", "k", "'", "'", true)
}

// FuzzRenderMessage checks that whatever the hooks return, the message block
// has the expected structure: it starts and ends with its tags, every item
// has the exact layout, no value contains a raw <, >, " or ' (so a
// plugin cannot close the block or forge an item), and unescaping gives back
// exactly the input in the input order.
func FuzzRenderMessage(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, k1, t1, p1, k2, t2, p2 string, two bool) {
		items := []hooks.EnrichmentItem{{Key: k1, Text: t1, CachePolicy: hooks.CachePolicy(p1)}}
		if two {
			items = append(items, hooks.EnrichmentItem{Key: k2, Text: t2, CachePolicy: hooks.CachePolicy(p2)})
		}
		out := RenderMessage(items)
		if !strings.HasPrefix(out, messageOpen) || !strings.HasSuffix(out, messageClose) {
			t.Fatalf("block not wrapped in its tags: %q", out)
		}
		got, err := parseBlock(out, messageOpen, messageClose)
		if err != nil {
			t.Fatalf("output does not parse: %v\n%q", err, out)
		}
		want := normalized(items)
		if !slices.Equal(got, want) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
		}
		if n := strings.Count(out, "<item "); n != len(items) {
			t.Fatalf("%d item tags for %d items", n, len(items))
		}
	})
}

// FuzzRenderSystem checks the system block's structure and that it holds
// exactly the input items, stable ones first, each group sorted by key with
// ties in input order.
func FuzzRenderSystem(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, k1, t1, p1, k2, t2, p2 string, two bool) {
		items := []hooks.EnrichmentItem{
			{Key: k1, Text: t1, CachePolicy: hooks.CachePolicy(p1)},
			{Key: k2, Text: t2, CachePolicy: hooks.CachePolicy(p2)},
			{Key: k1, Text: t2, CachePolicy: hooks.CachePolicy(p2)},
		}
		if two {
			items = append(items, hooks.EnrichmentItem{Key: k2, Text: t1, CachePolicy: hooks.Stable})
		}
		got, err := parseBlock(RenderSystem(items), systemOpen, systemClose)
		if err != nil {
			t.Fatalf("output does not parse: %v", err)
		}
		var stable, rest []hooks.EnrichmentItem
		for _, it := range normalized(items) {
			if it.CachePolicy == hooks.Stable {
				stable = append(stable, it)
			} else {
				rest = append(rest, it)
			}
		}
		byKey := func(a, b hooks.EnrichmentItem) int { return strings.Compare(a.Key, b.Key) }
		slices.SortStableFunc(stable, byKey)
		slices.SortStableFunc(rest, byKey)
		if want := append(stable, rest...); !slices.Equal(got, want) {
			t.Fatalf("order:\n got %+v\nwant %+v", got, want)
		}
	})
}

// FuzzBuild checks the persisted/transient split: the prompt starts with the
// user's text (trimmed only when a block follows), each block parses, and the
// item counts add up.
func FuzzBuild(f *testing.F) {
	f.Add("hello  \n", "k", "v", true, "matrix_message_target", "x", false, "extra")
	f.Add("", "", "", false, "k", "<v>", true, "")
	f.Add("q\u3000\x1c", "k", "'", false, "k", "&", true, "\n")
	f.Fuzz(func(t *testing.T, user, k1, t1 string, tr1 bool, k2, t2 string, tr2 bool, extra string) {
		msg := []hooks.EnrichmentItem{
			{Key: k1, Text: t1, Transient: tr1},
			{Key: k2, Text: t2, Transient: tr2},
		}
		turn := Build(user, msg, msg, extra)

		var persisted, transient, kept []hooks.EnrichmentItem
		for _, it := range normalized(msg) {
			if it.Key == "" || IsReserved(it.Key) {
				continue
			}
			kept = append(kept, it)
			if it.Transient {
				it.Transient = false // parseBlock does not report the flag
				transient = append(transient, it)
			} else {
				persisted = append(persisted, it)
			}
		}

		if len(persisted) == 0 {
			if turn.Prompt != user {
				t.Fatalf("prompt changed without persisted items: %q", turn.Prompt)
			}
		} else {
			head := strings.TrimRightFunc(user, isPySpace)
			block, ok := strings.CutPrefix(turn.Prompt, head+promptSep)
			if !ok {
				t.Fatalf("prompt does not start with the trimmed user text: %q", turn.Prompt)
			}
			got, err := parseBlock(block, messageOpen, messageClose)
			if err != nil {
				t.Fatalf("persisted block: %v", err)
			}
			if !slices.Equal(got, persisted) {
				t.Fatalf("persisted items:\n got %+v\nwant %+v", got, persisted)
			}
		}

		wantTransient := RenderTransient(RenderMessage(transient), extra)
		if turn.Transient != wantTransient {
			t.Fatalf("transient = %q, want %q", turn.Transient, wantTransient)
		}
		if (len(kept) == 0) != (turn.System == "") {
			t.Fatalf("system block %q for %d kept items", turn.System, len(kept))
		}
		if len(kept) > 0 {
			got, err := parseBlock(turn.System, systemOpen, systemClose)
			if err != nil {
				t.Fatalf("system block: %v", err)
			}
			if len(got) != len(kept) {
				t.Fatalf("system block has %d items, want %d", len(got), len(kept))
			}
		}
	})
}

// normalized returns a copy of items with the empty cache policy spelled out
// as parseBlock reports it.
func normalized(items []hooks.EnrichmentItem) []hooks.EnrichmentItem {
	out := make([]hooks.EnrichmentItem, len(items))
	for i, it := range items {
		it.CachePolicy = hooks.CachePolicy(policyText(it.CachePolicy))
		out[i] = it
	}
	return out
}
