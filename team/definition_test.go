package team

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookroom/hookroom/hooks"
)

func TestValidate(t *testing.T) {
	ok := Definition{Name: "research", Members: []hooks.AgentName{"searcher", "coder"}, Leader: "coder"}
	cases := []struct {
		name string
		defs []Definition
		want []string // each a whole problem; nil: valid
	}{
		{"valid", []Definition{ok, {Name: "panel", Members: []hooks.AgentName{"critic"}, Mode: ModeCollaborate, Show: ShowSeparate}}, nil},
		{"empty team", []Definition{{Name: "void"}}, []string{`teams.void.members: team "void" has no members`}},
		{"unknown member", []Definition{{Name: "x", Members: []hooks.AgentName{"searcher", "oracle"}}},
			[]string{`teams.x.members[1]: "oracle" is not a configured agent (known: assistant, coder, critic, searcher)`}},
		{"member twice", []Definition{{Name: "x", Members: []hooks.AgentName{"coder", "coder"}}}, []string{`teams.x.members[1]: "coder" is listed twice`}},
		{"itself", []Definition{{Name: "x", Members: []hooks.AgentName{"x"}}}, []string{`teams.x.members[0]: team "x" cannot be a member of itself`}},
		{"team of teams", []Definition{ok, {Name: "meta", Members: []hooks.AgentName{"research", "critic"}}},
			[]string{`teams.meta.members[0]: "research" is a team; teams cannot be members of teams (list its agents instead)`}},
		{"leader not a member", []Definition{{Name: "x", Members: []hooks.AgentName{"coder"}, Leader: "critic"}},
			[]string{`teams.x.leader: leader "critic" is not a member of team "x" (members: coder); leave it empty for the team's own model`}},
		{"bad mode and show", []Definition{{Name: "x", Members: []hooks.AgentName{"coder"}, Mode: "vote", Show: "hidden", MaxDepth: -1}}, []string{
			`teams.x.mode: unknown mode "vote": want "coordinate" or "collaborate"`,
			`teams.x.show: unknown show "hidden": want "folded" or "separate"`,
			`teams.x.max_depth: max_depth -1 must not be negative`,
		}},
		{"name of an agent", []Definition{{Name: "coder", Members: []hooks.AgentName{"searcher"}}},
			[]string{`teams.coder: team "coder" has the name of an agent; teams and agents share one namespace`}},
		{"bad name", []Definition{{Name: "Big Team", Members: []hooks.AgentName{"searcher"}}}, []string{`teams.Big Team: team name "Big Team" must match ^[a-z0-9_-]+$`}},
		{"router", []Definition{{Name: "router", Members: []hooks.AgentName{"searcher"}}}, []string{`teams.router: team name "router" is reserved for the router`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.defs, known)
			if tc.want == nil {
				if err != nil {
					t.Errorf("Validate = %v", err)
				}
				return
			}
			var got []string
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Errorf("problem %v is not a *FieldError", e)
				}
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Validate =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDefinitionDecodesFromYAML(t *testing.T) {
	src := `
research:
  display_name: Research desk
  username: research-desk
  role: answers research questions
  members: [searcher, coder]
  mode: collaborate
  leader: coder
  model: big
  instructions: Be brief.
  rooms: [lobby]
  show: separate
  max_depth: 1
`
	var ts Teams
	dec := yaml.NewDecoder(strings.NewReader(src))
	dec.KnownFields(true)
	if err := dec.Decode(&ts); err != nil {
		t.Fatal(err)
	}
	list := ts.List()
	want := Definition{
		Name: "research", DisplayName: "Research desk", Username: "research-desk", Role: "answers research questions",
		Members: []hooks.AgentName{"searcher", "coder"}, Mode: ModeCollaborate, Leader: "coder", Model: "big",
		Instructions: "Be brief.", Rooms: []string{"lobby"}, Show: ShowSeparate, MaxDepth: 1,
	}
	if len(list) != 1 || !reflect.DeepEqual(list[0], want) {
		t.Errorf("decoded %+v, want %+v", list, want)
	}
	if err := Validate(list, known); err != nil {
		t.Error(err)
	}
	d := Definition{Name: "x", Members: []hooks.AgentName{"a"}}.WithDefaults()
	if d.Mode != ModeCoordinate || d.Show != ShowFolded || d.DisplayName != "x" || d.Username != "x" || d.LeaderName() != "x" {
		t.Errorf("defaults = %+v", d)
	}
}

func TestAdHoc(t *testing.T) {
	if _, ok := AdHoc([]hooks.AgentName{"coder"}, ""); ok {
		t.Error("one agent formed a team")
	}
	if _, ok := AdHoc([]hooks.AgentName{"coder", "coder"}, ""); ok {
		t.Error("one agent mentioned twice formed a team")
	}
	d, ok := AdHoc([]hooks.AgentName{"searcher", "coder", "searcher"}, "")
	if !ok {
		t.Fatal("two agents formed no team")
	}
	want := Definition{Name: "adhoc:searcher+coder", DisplayName: "searcher", Members: []hooks.AgentName{"searcher", "coder"},
		Mode: ModeCollaborate, Leader: "searcher", Show: ShowFolded}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("AdHoc = %+v, want %+v", d, want)
	}
	if err := Validate([]Definition{d}, known); err == nil || !strings.Contains(err.Error(), "must match") {
		t.Errorf("an ad-hoc team's name passed the configured-name check: %v", err)
	}
	d, _ = AdHoc([]hooks.AgentName{"a", "b"}, ModeCoordinate)
	if d.Mode != ModeCoordinate {
		t.Errorf("mode = %q", d.Mode)
	}
	f := d.Fields(nil)
	if !f.AdHoc || f.Team != "adhoc:a+b" || !reflect.DeepEqual(f.TargetMembers, []hooks.AgentName{"a", "b"}) || f.Leader != "a" {
		t.Errorf("fields = %+v", f)
	}
}
