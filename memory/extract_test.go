package memory

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestParseExtraction(t *testing.T) {
	many := `{"memories":[` + strings.Repeat(`{"text":"a fact"},`, MaxCandidates) + `{"text":"one more"}]}`
	for _, tc := range []struct {
		name, answer string
		want         []string // nil: an error
	}{
		{"two facts", `{"memories":[{"text":"The person is vegetarian."},{"text":" Lives in  Lyon. "}]}`,
			[]string{"The person is vegetarian.", "Lives in Lyon."}},
		{"nothing", `{"memories":[]}`, []string{}},
		{"in a code fence", "```json\n{\"memories\":[{\"text\":\"Likes jazz.\"}]}\n```", []string{"Likes jazz."}},
		{"duplicates dropped", `{"memories":[{"text":"Likes jazz."},{"text":"Likes  jazz."}]}`, []string{"Likes jazz."}},
		{"prose", `The person likes jazz.`, nil},
		{"truncated", `{"memories":[{"text":"Likes ja`, nil},
		{"no list", `{}`, nil},
		{"null list", `{"memories":null}`, nil},
		{"list of strings", `{"memories":["Likes jazz."]}`, nil},
		{"unknown field", `{"memories":[{"text":"Likes jazz.","scope":"agent"}]}`, nil},
		{"missing text", `{"memories":[{}]}`, nil},
		{"empty text", `{"memories":[{"text":"  "}]}`, nil},
		{"text after the object", `{"memories":[]} and more`, nil},
		{"two objects", `{"memories":[]}{"memories":[]}`, nil},
		{"too many", many, nil},
		{"text too long", `{"memories":[{"text":"` + strings.Repeat("é", 11) + `"}]}`, nil},
		{"answer too large", `{"memories":[{"text":"` + strings.Repeat("x", MaxExtractionBytes) + `"}]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseExtraction(tc.answer, 10+len("The person is vegetarian."))
			if tc.name == "text too long" {
				got, err = ParseExtraction(tc.answer, 10)
			}
			if tc.want == nil {
				if err == nil || !errors.Is(err, ErrBadExtraction) {
					t.Fatalf("ParseExtraction = %+v, %v; want ErrBadExtraction", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, c := range got {
				texts = append(texts, c.Text)
			}
			if !slices.Equal(texts, tc.want) && !(len(texts) == 0 && len(tc.want) == 0) {
				t.Errorf("ParseExtraction = %q, want %q", texts, tc.want)
			}
		})
	}
}

func TestExtractionRequest(t *testing.T) {
	req := ExtractionRequest(ExtractionTurn{
		UserText: `I'm vegetarian, "strictly"`, Reply: "Noted!" + strings.Repeat("x", 2*maxTurnText),
		Known: []Memory{{Text: "Lives in Lyon."}},
	})
	if len(req.Messages) != 2 || req.Messages[0].Role != agents.RoleSystem || req.Messages[1].Role != agents.RoleUser {
		t.Fatalf("messages %+v", req.Messages)
	}
	user := req.Messages[1].Content
	for _, want := range []string{"- Lives in Lyon.", `"person":"I'm vegetarian, \"strictly\""`, `"assistant":"Noted!xxx`} {
		if !strings.Contains(user, want) {
			t.Errorf("the request lacks %q:\n%s", want, user)
		}
	}
	if len(user) > 2*maxTurnText+200 {
		t.Errorf("the reply was not cut: %d bytes", len(user))
	}
	if req.ResponseSchema == nil || !req.ResponseSchema.Strict || req.ResponseSchema.Name != "memories" || !json.Valid(req.ResponseSchema.Schema) {
		t.Errorf("schema %+v", req.ResponseSchema)
	}
	if req.Temperature == nil || *req.Temperature != 0 {
		t.Error("want temperature 0")
	}
	// The schema's example answer parses.
	if _, err := ParseExtraction(`{"memories":[{"text":"x"}]}`, 0); err != nil {
		t.Error(err)
	}
}

// What the hooks let through is stored in the person's scope, once.
func TestStoreCandidates(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		who := Who{Agent: helper, Person: alice, Room: roomA}
		remember(t, s, who, ScopePerson, "Lives in Lyon.")
		stored, err := s.StoreCandidates(ctx, who, []Candidate{{Text: "Lives in Lyon."}, {Text: "Is vegetarian."}})
		if err != nil || len(stored) != 1 || stored[0].Text != "Is vegetarian." || stored[0].Source != SourceExtracted || stored[0].Scope != ScopePerson {
			t.Fatalf("StoreCandidates = %+v, %v", stored, err)
		}
		if list, _ := s.List(ctx, Who{Agent: helper, Person: bob, Room: roomA}); len(list) != 0 {
			t.Errorf("bob sees %q", texts(list))
		}
		if _, err := s.StoreCandidates(ctx, Who{Agent: "nobody", Person: alice}, []Candidate{{Text: "x"}}); !errors.Is(err, ErrDisabled) {
			t.Errorf("for an agent without memory: %v", err)
		}
	})
}
