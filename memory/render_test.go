package memory

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/enrich"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func blockMemories() []Memory {
	t0 := time.UnixMilli(1_767_225_600_000)
	return []Memory{
		{ID: "mzzzzzzz2", Scope: ScopeRoom, Text: "This room plans the summer party for <June>.", CreatedAt: t0.Add(2 * time.Minute), Score: 0.9},
		{ID: "mbbbbbbb2", Scope: ScopePerson, Text: "Alice is allergic to peanuts.", CreatedAt: t0, Score: 0.1},
		{ID: "maaaaaaa2", Scope: ScopeAgent, Text: "Answers are in British English & metric units.", CreatedAt: t0.Add(time.Minute), Score: 0.5},
		{ID: "maaaaaaa3", Scope: ScopePerson, Text: "Alice's cat is called Mochi 🐱.", CreatedAt: t0.Add(time.Minute), Score: 0.7},
	}
}

// The block is byte-stable: the same memories give the same bytes in any
// rank order, and so does the message-context block enrich renders from it.
func TestBlockGolden(t *testing.T) {
	mems := blockMemories()
	block := Block(mems)
	golden(t, "block.golden", block)
	for _, perm := range [][]int{{3, 2, 1, 0}, {1, 3, 0, 2}, {2, 0, 3, 1}} {
		shuffled := make([]Memory, len(mems))
		for i, j := range perm {
			shuffled[i] = mems[j]
			shuffled[i].Score = float64(i)
		}
		if got := Block(shuffled); got != block {
			t.Errorf("order %v gives another block:\n%s", perm, got)
		}
	}
	it, ok := Item(mems)
	if !ok || it.Key != ItemKey || !it.Transient || it.Text != block {
		t.Fatalf("Item = %+v, %v", it, ok)
	}
	golden(t, "transient.golden", enrich.RenderMessage([]hooks.EnrichmentItem{it}))
	if Block(nil) != "" {
		t.Error("Block(nil) is not empty")
	}
	if _, ok := Item(nil); ok {
		t.Error("Item(nil) gives an item")
	}
}

// The message:enrich collector adds the requester's memories for the target
// agent, as one transient item, and nothing for someone else.
func TestEnrichHook(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		remember(t, s, Who{Agent: helper, Person: alice, Room: roomA}, ScopePerson, "Alice is allergic to peanuts")
		remember(t, s, Who{Agent: helper, Person: bob, Room: roomA}, ScopePerson, "Bob is allergic to shellfish")
		reg, err := hooks.NewRegistry([]hooks.Plugin{{Name: "memory", Source: "builtin:memory",
			Hooks: []hooks.Hook{EnrichHook(s, func(context.Context, id.RoomID) bool { return false })}}}, hooks.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			person id.UserID
			agent  hooks.AgentName
			want   []string
		}{
			{alice, helper, []string{"Alice is allergic to peanuts"}},
			{bob, helper, []string{"Bob is allergic to shellfish"}},
			{carol, helper, nil},
			{alice, "nobody", nil},
		} {
			c := &hooks.MessageEnrichContext{
				Envelope:    hooks.Envelope{RoomID: roomA, RequesterID: tc.person, SenderID: tc.person, Body: "what am I allergic to?", AgentName: tc.agent},
				TargetAgent: tc.agent,
			}
			if err := hooks.Emit(ctx, reg, hooks.MessageEnrich, c); err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				if len(c.Items) != 0 {
					t.Errorf("%s with %s: items %+v, want none", tc.person, tc.agent, c.Items)
				}
				continue
			}
			mems, _ := s.List(ctx, Who{Agent: tc.agent, Person: tc.person, Room: roomA})
			want, _ := Item(slices.DeleteFunc(mems, func(m Memory) bool { return !slices.Contains(tc.want, m.Text) }))
			if len(c.Items) != 1 || c.Items[0] != want {
				t.Errorf("%s with %s: items %+v, want %+v", tc.person, tc.agent, c.Items, want)
			}
		}
	})
}

func TestListing(t *testing.T) {
	mems := blockMemories()[:2]
	want := "- `mzzzzzzz2` (room, 2026-01-01) This room plans the summer party for <June>.\n" +
		"- `mbbbbbbb2` (person, 2026-01-01) Alice is allergic to peanuts."
	if got := Listing(mems); got != want {
		t.Errorf("Listing =\n%s\nwant\n%s", got, want)
	}
	if Listing(nil) != "" {
		t.Error("Listing(nil) is not empty")
	}
}
