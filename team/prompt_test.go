package team

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it); got:\n%s", path, got)
	}
}

func TestParsePlan(t *testing.T) {
	members := []hooks.AgentName{"searcher", "analyst", "coder"}
	a := func(m hooks.AgentName, task string) Assignment { return Assignment{Member: m, Task: task} }
	cases := []struct {
		name string
		text string
		want []Assignment
		err  string
	}{
		{"the protocol", `{"assignments": [{"member": "searcher", "task": "find"}, {"member": "coder", "task": "code"}]}`,
			[]Assignment{a("searcher", "find"), a("coder", "code")}, ""},
		{"in member order", `{"assignments": [{"member": "coder", "task": "code"}, {"member": "searcher", "task": "find"}]}`,
			[]Assignment{a("searcher", "find"), a("coder", "code")}, ""},
		{"fenced after prose", "Plan:\n```json\n{\"assignments\": [{\"member\": \"analyst\", \"task\": \"weigh\"}]}\n```\nDone.",
			[]Assignment{a("analyst", "weigh")}, ""},
		{"prose around", `I'll ask: {"assignments":[{"member":"analyst","task":"weigh"}]} and then write.`, []Assignment{a("analyst", "weigh")}, ""},
		{"a brace before the JSON", `Use {braces} wisely: {"assignments":[{"member":"analyst","task":"weigh"}]}`, []Assignment{a("analyst", "weigh")}, ""},
		{"other field names", `{"tasks": [{"agent": "@Searcher", "question": "find"}, {"name": "coder:example.org", "prompt": "code"}]}`,
			[]Assignment{a("searcher", "find"), a("coder", "code")}, ""},
		{"bare array", `[{"member": "coder", "task": "code"}]`, []Assignment{a("coder", "code")}, ""},
		{"names only: the question", `{"members": ["analyst", "coder"]}`, []Assignment{a("analyst", "Q"), a("coder", "Q")}, ""},
		{"a map of tasks", `{"coder": "code", "searcher": "find"}`, []Assignment{a("searcher", "find"), a("coder", "code")}, ""},
		{"twice: joined", `[{"member": "coder", "task": "one"}, {"member": "coder", "task": "two"}, {"member": "coder", "task": "one"}]`,
			[]Assignment{a("coder", "one\n\ntwo")}, ""},
		{"unknown dropped", `[{"member": "coder", "task": "code"}, {"member": "oracle", "task": "?"}]`, []Assignment{a("coder", "code")}, ""},
		{"only unknown", `[{"member": "oracle", "task": "?"}]`, nil, "names no member of the team (it names oracle)"},
		{"empty", `{"assignments": []}`, nil, "assigns nothing"},
		{"no JSON", "Ask the searcher.", nil, "holds no JSON"},
		{"broken JSON", `{"assignments": [{"member": "coder"`, nil, "holds no JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePlan(tc.text, members, "Q")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("ParsePlan = %+v, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ParsePlan = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

var goldenContributions = []Contribution{
	{Member: "searcher", Task: "Find sources on tides", Text: "Tides follow the moon.\n\nSee NOAA's primer."},
	{Member: "analyst", Task: "Why are there tides?", Text: "Mostly the moon; the sun adds a third."},
	{Member: "coder", Task: "Why are there tides?", Err: "failed to run coder: the model is unavailable"},
}

func TestSynthesisPromptGolden(t *testing.T) {
	d := Definition{Name: "research", DisplayName: "Research desk", Members: []hooks.AgentName{"searcher", "analyst", "coder"},
		Instructions: "Answer in two sentences."}
	golden(t, "synthesis.golden", SynthesisSystem(d)+"\n---\n"+SynthesisPrompt("Why are there tides?", goldenContributions))
	golden(t, "plan.golden", PlanSystem(d, map[hooks.AgentName]string{"searcher": "finds sources", "analyst": "weighs evidence"})+
		"\n---\n"+PlanPrompt("Why are there tides?"))
}

func TestFoldedReplyGolden(t *testing.T) {
	res := Result{Contributions: goldenContributions, Synthesis: "Tides come from the moon's pull, with the sun's help.\n"}
	display := map[hooks.AgentName]string{"searcher": "Searcher", "analyst": "Analyst"}
	golden(t, "folded.golden", RenderFolded(res, display))
	golden(t, "separate.golden", RenderContribution(goldenContributions[0], display)+"\n---\n"+RenderContribution(goldenContributions[2], display))
}
