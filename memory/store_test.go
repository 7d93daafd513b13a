package memory

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	helper = hooks.AgentName("helper")
	other  = hooks.AgentName("other")
	alice  = id.UserID("@alice:x")
	bob    = id.UserID("@bob:x")
	carol  = id.UserID("@carol:x")
	roomA  = id.RoomID("!a:x")
	roomB  = id.RoomID("!b:x")
)

var allScopes = Options{Enabled: true, Scopes: []Scope{ScopePerson, ScopeRoom, ScopeAgent}}

// newStore returns a store constructor for dbtest.ForStores: helper has
// every scope, other person memories only.
func newStore(emb Embedder) func(*dbutil.Database) *Store {
	return func(db *dbutil.Database) *Store {
		s := New(db, Config{}, emb)
		s.Configure(map[hooks.AgentName]Options{helper: allScopes, other: {Enabled: true, Scopes: []Scope{ScopePerson}}})
		return s
	}
}

func remember(t *testing.T, s *Store, who Who, scope Scope, text string) Memory {
	t.Helper()
	m, _, err := s.Remember(t.Context(), who, scope, text, "$event")
	if err != nil {
		t.Fatalf("Remember(%v, %s, %q): %v", who, scope, text, err)
	}
	return m
}

func texts(mems []Memory) []string {
	out := make([]string, len(mems))
	for i, m := range mems {
		out[i] = m.Text
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func TestRememberDedupesAndLists(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		m, created, err := s.Remember(ctx, who, ScopePerson, "  Alice's  favourite\ncolour is teal ", "$e1")
		if err != nil || !created {
			t.Fatalf("Remember = %+v, %v, %v", m, created, err)
		}
		if m.Text != "Alice's favourite colour is teal" || m.Person != alice || m.Room != roomA || m.Author != alice ||
			m.Source != "$e1" || len(m.ID) != 9 || m.ID[0] != 'm' || m.Scope != ScopePerson {
			t.Errorf("stored %+v", m)
		}
		again, created, err := s.Remember(ctx, Who{Agent: helper, Person: alice, Room: roomB}, ScopePerson, "Alice's favourite colour is teal", "$e2")
		if err != nil || created || again.ID != m.ID || again.Source != "$e1" {
			t.Errorf("the same text again = %+v, created %v, %v; want the stored one", again, created, err)
		}
		room, created, err := s.Remember(ctx, who, ScopeRoom, "Alice's favourite colour is teal", "tool")
		if err != nil || !created || room.ID == m.ID || room.Room != roomA || room.Person != "" {
			t.Errorf("the same text in the room scope = %+v, created %v, %v; want a new memory", room, created, err)
		}
		list, err := s.List(ctx, who)
		if err != nil || len(list) != 2 || list[0].ID != m.ID || list[1].ID != room.ID {
			t.Fatalf("List = %+v, %v", list, err)
		}
		if !list[0].CreatedAt.Equal(m.CreatedAt.Truncate(1e6)) {
			t.Errorf("CreatedAt = %v, want %v", list[0].CreatedAt, m.CreatedAt)
		}
		for _, tc := range []struct {
			name  string
			who   Who
			scope Scope
			text  string
			want  error
		}{
			{"agent without memory", Who{Agent: "nobody", Person: alice, Room: roomA}, ScopePerson, "x", ErrDisabled},
			{"scope not enabled", Who{Agent: other, Person: alice, Room: roomA}, ScopeRoom, "x", ErrDisabled},
			{"empty text", who, ScopePerson, " \n\t", ErrEmpty},
		} {
			if _, _, err := s.Remember(ctx, tc.who, tc.scope, tc.text, "tool"); !errors.Is(err, tc.want) {
				t.Errorf("%s: Remember = %v, want %v", tc.name, err, tc.want)
			}
		}
		if _, _, err := s.Remember(ctx, Who{Agent: helper, Room: roomA}, ScopePerson, "x", "tool"); err == nil {
			t.Error("a person memory without a person was stored")
		}
		if _, _, err := s.Remember(ctx, who, "planet", "x", "tool"); err == nil {
			t.Error("a memory in an unknown scope was stored")
		}
	})
}

// The privacy rule: two people, two rooms, two agents. Whatever the query,
// Recall and List return exactly the person's own memories with the agent,
// the room's and the agent's.
func TestPrivacy(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		remember(t, s, Who{Agent: helper, Person: alice, Room: roomA}, ScopePerson, "alice allergy peanuts")
		remember(t, s, Who{Agent: helper, Person: bob, Room: roomA}, ScopePerson, "bob allergy shellfish")
		remember(t, s, Who{Agent: helper, Person: alice, Room: roomA}, ScopeRoom, "room a allergy list for the party")
		remember(t, s, Who{Agent: helper, Person: bob, Room: roomB}, ScopeRoom, "room b allergy medication talk")
		remember(t, s, Who{Agent: helper, Person: bob, Room: roomB}, ScopeAgent, "helper agent allergy handbook")
		remember(t, s, Who{Agent: other, Person: alice, Room: roomB}, ScopePerson, "other agent alice allergy cats")

		for _, tc := range []struct {
			name string
			who  Who
			want []string
		}{
			{"alice in room a", Who{Agent: helper, Person: alice, Room: roomA},
				[]string{"alice allergy peanuts", "room a allergy list for the party", "helper agent allergy handbook"}},
			{"alice in room b", Who{Agent: helper, Person: alice, Room: roomB},
				[]string{"alice allergy peanuts", "room b allergy medication talk", "helper agent allergy handbook"}},
			{"bob in room a", Who{Agent: helper, Person: bob, Room: roomA},
				[]string{"bob allergy shellfish", "room a allergy list for the party", "helper agent allergy handbook"}},
			{"bob in room b", Who{Agent: helper, Person: bob, Room: roomB},
				[]string{"bob allergy shellfish", "room b allergy medication talk", "helper agent allergy handbook"}},
			{"carol, who told nothing, in room a", Who{Agent: helper, Person: carol, Room: roomA},
				[]string{"room a allergy list for the party", "helper agent allergy handbook"}},
			{"no person", Who{Agent: helper, Room: roomA},
				[]string{"room a allergy list for the party", "helper agent allergy handbook"}},
			{"alice with the other agent", Who{Agent: other, Person: alice, Room: roomA},
				[]string{"other agent alice allergy cats"}},
			{"bob with the other agent", Who{Agent: other, Person: bob, Room: roomA}, nil},
			{"an agent without memory", Who{Agent: "nobody", Person: alice, Room: roomA}, nil},
		} {
			t.Run(tc.name, func(t *testing.T) {
				for _, q := range []string{"allergy", "alice bob peanuts shellfish allergy cats", "room party medication handbook allergy"} {
					got, err := s.Recall(ctx, tc.who, q, 20)
					if err != nil {
						t.Fatal(err)
					}
					for _, m := range got {
						if !slices.Contains(tc.want, m.Text) {
							t.Errorf("Recall(%q) returned %q, which %s may not see", q, m.Text, tc.who.Person)
						}
					}
					if q == "allergy" && !slices.Equal(sorted(texts(got)), sorted(tc.want)) {
						t.Errorf("Recall(%q) = %q, want %q", q, texts(got), tc.want)
					}
				}
				if tc.who.Agent == "nobody" {
					return
				}
				list, err := s.List(ctx, tc.who)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(sorted(texts(list)), sorted(tc.want)) {
					t.Errorf("List = %q, want %q", texts(list), tc.want)
				}
			})
		}
	})
}

// Recall and Remember honour the agent's enabled scopes; List shows what is
// stored all the same, so people can review and forget it.
func TestScopesFollowTheAgentsOptions(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		remember(t, s, who, ScopePerson, "alice likes tea")
		remember(t, s, who, ScopeRoom, "room a likes tea")
		s.Configure(map[hooks.AgentName]Options{helper: {Enabled: true, Scopes: []Scope{ScopePerson}}})
		got, err := s.Recall(ctx, who, "tea", 0)
		if err != nil || !slices.Equal(texts(got), []string{"alice likes tea"}) {
			t.Errorf("Recall with person scope only = %q, %v", texts(got), err)
		}
		if list, _ := s.List(ctx, who); len(list) != 2 {
			t.Errorf("List = %q, want both memories", texts(list))
		}
		s.Configure(nil)
		if got, err := s.Recall(ctx, who, "tea", 0); err != nil || len(got) != 0 {
			t.Errorf("Recall with memory off = %q, %v", texts(got), err)
		}
		if err := s.Forget(ctx, who, got0(t, s, who).ID); err != nil {
			t.Errorf("Forget with memory off: %v", err)
		}
	})
}

func got0(t *testing.T, s *Store, who Who) Memory {
	t.Helper()
	list, err := s.List(t.Context(), who)
	if err != nil || len(list) == 0 {
		t.Fatalf("List = %v, %v", list, err)
	}
	return list[0]
}

// ftsEntries counts the full-text index's entries for term: SQLite's FTS5
// vocabulary (the index itself, not the content table), PostgreSQL's rows
// whose tsvector holds it.
func ftsEntries(t *testing.T, db *dbutil.Database, term string) (docs, matching int) {
	t.Helper()
	ctx := t.Context()
	var err error
	if db.Dialect == dbutil.Postgres {
		err = db.QueryRow(ctx, `SELECT count(*) FROM memory WHERE tsv IS NOT NULL`).Scan(&docs)
		if err == nil {
			err = db.QueryRow(ctx, `SELECT count(*) FROM memory WHERE tsv @@ to_tsquery('english', $1)`, term).Scan(&matching)
		}
	} else {
		_, err = db.Exec(ctx, `CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_vocab USING fts5vocab(main, memory_fts, row)`)
		if err == nil {
			err = db.QueryRow(ctx, `SELECT count(*) FROM memory_fts_docsize`).Scan(&docs)
		}
		if err == nil {
			err = db.QueryRow(ctx, `SELECT coalesce(sum(doc), 0) FROM temp.memory_vocab WHERE term=$1`, term).Scan(&matching)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return docs, matching
}

// Forget deletes for real: the row, its index entry and its vector.
func TestForgetRemovesFromTheIndex(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		m := remember(t, s, who, ScopePerson, "Alice is allergic to peanuts")
		remember(t, s, who, ScopePerson, "Alice plays the cello")
		docs, peanut := ftsEntries(t, db, "peanut")
		if docs != 2 || peanut != 1 {
			t.Fatalf("before Forget: %d indexed memories, %d with peanut; want 2 and 1", docs, peanut)
		}
		if got, _ := s.Recall(ctx, who, "peanuts", 5); len(got) != 1 {
			t.Fatalf("Recall before Forget = %q", texts(got))
		}
		if err := s.Forget(ctx, who, m.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Recall(ctx, who, "peanuts allergic", 5); err != nil || len(got) != 0 {
			t.Errorf("Recall after Forget = %q, %v", texts(got), err)
		}
		docs, peanut = ftsEntries(t, db, "peanut")
		if docs != 1 || peanut != 0 {
			t.Errorf("after Forget: %d indexed memories, %d with peanut; want 1 and 0", docs, peanut)
		}
		var rows int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM memory WHERE id=$1`, m.ID).Scan(&rows); err != nil || rows != 0 {
			t.Errorf("rows with the forgotten id: %d, %v", rows, err)
		}
		if err := s.Forget(ctx, who, m.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("Forget again = %v, want ErrNotFound", err)
		}
	})
}

// Who may forget what: a person their own person memories, and the room (from
// within it) and agent memories they told.
func TestForgetRules(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		aliceA := Who{Agent: helper, Person: alice, Room: roomA}
		for _, tc := range []struct {
			name   string
			scope  Scope
			forget Who
			ok     bool
		}{
			{"alice forgets her own memory", ScopePerson, aliceA, true},
			{"from another room too", ScopePerson, Who{Agent: helper, Person: alice, Room: roomB}, true},
			{"bob cannot forget alice's memory", ScopePerson, Who{Agent: helper, Person: bob, Room: roomA}, false},
			{"nor can nobody", ScopePerson, Who{Agent: helper, Room: roomA}, false},
			{"nor another agent", ScopePerson, Who{Agent: other, Person: alice, Room: roomA}, false},
			{"alice forgets a room memory she told", ScopeRoom, aliceA, true},
			{"but not from another room", ScopeRoom, Who{Agent: helper, Person: alice, Room: roomB}, false},
			{"bob cannot forget a room memory alice told", ScopeRoom, Who{Agent: helper, Person: bob, Room: roomA}, false},
			{"alice forgets an agent memory she told", ScopeAgent, Who{Agent: helper, Person: alice, Room: roomB}, true},
			{"bob cannot forget an agent memory alice told", ScopeAgent, Who{Agent: helper, Person: bob, Room: roomA}, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				m := remember(t, s, aliceA, tc.scope, "memory for "+tc.name)
				err := s.Forget(ctx, tc.forget, m.ID)
				if tc.ok && err != nil || !tc.ok && !errors.Is(err, ErrNotFound) {
					t.Fatalf("Forget = %v, want ok %v", err, tc.ok)
				}
				var rows int
				_ = db.QueryRow(ctx, `SELECT count(*) FROM memory WHERE id=$1`, m.ID).Scan(&rows)
				if (rows == 0) != tc.ok {
					t.Errorf("%d rows left", rows)
				}
				_ = s.Forget(ctx, aliceA, m.ID)
				_ = s.Forget(ctx, Who{Agent: helper, Person: alice, Room: roomB}, m.ID)
			})
		}
	})
}

func TestForgetAll(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		aliceA := Who{Agent: helper, Person: alice, Room: roomA}
		aliceB := Who{Agent: helper, Person: alice, Room: roomB}
		bobA := Who{Agent: helper, Person: bob, Room: roomA}
		remember(t, s, aliceA, ScopePerson, "alice one")
		remember(t, s, aliceB, ScopePerson, "alice two")
		remember(t, s, aliceA, ScopeRoom, "room a by alice")
		remember(t, s, aliceB, ScopeRoom, "room b by alice")
		remember(t, s, aliceB, ScopeAgent, "agent by alice")
		remember(t, s, bobA, ScopePerson, "bob one")
		remember(t, s, bobA, ScopeRoom, "room a by bob")
		remember(t, s, Who{Agent: other, Person: alice, Room: roomA}, ScopePerson, "alice with other")
		n, err := s.ForgetAll(ctx, aliceA)
		if err != nil || n != 4 {
			t.Fatalf("ForgetAll = %d, %v; want 4", n, err)
		}
		var left []string
		rows, err := db.Query(ctx, `SELECT text FROM memory ORDER BY seq`)
		left, err = dbutil.NewRowIterWithError(rows, dbutil.ScanSingleColumn[string], err).AsList()
		want := []string{"room b by alice", "bob one", "room a by bob", "alice with other"}
		if err != nil || !slices.Equal(left, want) {
			t.Errorf("left %q, %v; want %q", left, err, want)
		}
		if n, err := s.ForgetAll(ctx, Who{Agent: helper, Room: roomA}); err != nil || n != 0 {
			t.Errorf("ForgetAll without a person = %d, %v", n, err)
		}
	})
}

// Beyond max_per_scope, the scope's oldest memories go; other scopes keep
// theirs.
func TestMaxPerScope(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		s.Configure(map[hooks.AgentName]Options{helper: {Enabled: true, MaxPerScope: 3}})
		aliceA := Who{Agent: helper, Person: alice, Room: roomA}
		bobA := Who{Agent: helper, Person: bob, Room: roomA}
		remember(t, s, bobA, ScopePerson, "bob fact")
		for _, text := range []string{"fact one", "fact two", "fact three", "fact four", "fact five"} {
			remember(t, s, aliceA, ScopePerson, text)
		}
		list, err := s.List(ctx, aliceA)
		if want := []string{"fact three", "fact four", "fact five"}; err != nil || !slices.Equal(texts(list), want) {
			t.Errorf("List = %q, %v; want %q", texts(list), err, want)
		}
		if list, _ := s.List(ctx, bobA); !slices.Equal(texts(list), []string{"bob fact"}) {
			t.Errorf("bob's List = %q", texts(list))
		}
		if docs, one := ftsEntries(t, db, "one"); docs != 4 || one != 0 {
			t.Errorf("index: %d memories, %d with one; want 4 and 0", docs, one)
		}
	})
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want string
	}{
		{"  a \n b\t\tc  ", 0, "a b c"},
		{"héllo wörld", 7, "héllo w"},
		{"héllo wörld", 6, "héllo"},
		{"日本語のテキスト", 3, "日本語"},
		{"👍🏽👍🏽", 3, "👍🏽👍"},
		{"bad \xff byte", 0, "bad \uFFFD byte"},
		{"short", 100, "short"},
	} {
		if got := Normalize(tc.in, tc.max); got != tc.want {
			t.Errorf("Normalize(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
	}
}

// Remember cuts long texts at max_text_length characters.
func TestRememberCapsText(t *testing.T) {
	dbtest.ForStores(t, func(db *dbutil.Database) *Store {
		s := New(db, Config{MaxTextLength: 10}, nil)
		s.Configure(map[hooks.AgentName]Options{helper: {Enabled: true}})
		return s
	}, func(t *testing.T, _ *dbutil.Database, s *Store) {
		m := remember(t, s, Who{Agent: helper, Person: alice}, ScopePerson, "ééééé ééééé ééééé")
		if m.Text != "ééééé éééé" {
			t.Errorf("stored %q", m.Text)
		}
		if list, _ := s.List(context.Background(), Who{Agent: helper, Person: alice}); len(list) != 1 || list[0].Text != m.Text {
			t.Errorf("List = %q", texts(list))
		}
	})
}

func TestQueryTerms(t *testing.T) {
	got := queryTerms("What is MY favourite colour? favourite, colour; café 42 " + strings.Repeat("x", 65))
	want := []string{"favourite", "colour", "café", "42"}
	if !slices.Equal(got, want) {
		t.Errorf("queryTerms = %q, want %q", got, want)
	}
}

// The same text remembered at once from several turns is stored once.
func TestRememberRace(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		who := Who{Agent: helper, Person: alice, Room: roomA}
		ids := make([]string, 8)
		wins, errs := dbtest.Race(8, func(i int) (bool, error) {
			m, created, err := s.Remember(t.Context(), who, ScopePerson, "Alice likes tea", "$e")
			ids[i] = m.ID
			return created, err
		})
		if wins != 1 || len(errs) != 0 {
			t.Fatalf("%d stored it, errors %v; want exactly one", wins, errs)
		}
		for _, got := range ids {
			if got != ids[0] {
				t.Errorf("ids %q: want one memory", ids)
				break
			}
		}
		if list, _ := s.List(t.Context(), who); len(list) != 1 {
			t.Errorf("List = %q", texts(list))
		}
	})
}
