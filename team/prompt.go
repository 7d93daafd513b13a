package team

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// The leader's plan is one JSON object:
//
//	{"assignments": [{"member": "searcher", "task": "Find …"}, …]}
//
// ParsePlan reads it leniently: in a ```json fence or after some prose, as
// a bare array of assignments or of member names, or as an object mapping
// member names to tasks; "agent" or "name" for "member", "question" or
// "prompt" for "task"; member names in any case, with or without "@".

// PlanSchema is the JSON schema of the leader's plan, for providers with
// structured output.
func PlanSchema() *agents.ResponseSchema {
	return &agents.ResponseSchema{Name: "team_plan", Schema: json.RawMessage(`{
	"type": "object",
	"properties": {
		"assignments": {
			"type": "array",
			"items": {
				"type": "object",
				"properties": {
					"member": {"type": "string", "description": "the member's name"},
					"task": {"type": "string", "description": "what to ask this member"}
				},
				"required": ["member", "task"],
				"additionalProperties": false
			}
		}
	},
	"required": ["assignments"],
	"additionalProperties": false
}`), Strict: true}
}

// PlanSystem is what a coordinating leader is told before it plans: the
// team, its members (with their roles, when known) and the plan's format.
func PlanSystem(d Definition, roles map[hooks.AgentName]string) string {
	d = d.WithDefaults()
	var b strings.Builder
	fmt.Fprintf(&b, "You lead the team %q. A person wrote to the team; decide which members should work on the message and what to ask each of them. Their answers come back to you, and you then write the team's reply.\n\nMembers:\n", d.DisplayName)
	for _, m := range d.Members {
		if role := strings.TrimSpace(roles[m]); role != "" {
			fmt.Fprintf(&b, "- %s: %s\n", m, role)
		} else {
			fmt.Fprintf(&b, "- %s\n", m)
		}
	}
	b.WriteString("\nAnswer with one JSON object and nothing else:\n" +
		`{"assignments": [{"member": "<member name>", "task": "<what to ask this member>"}]}` + "\n" +
		"Ask only members who can help, each at most once, and make each task complete on its own: members do not see each other's tasks.")
	if s := strings.TrimSpace(d.Instructions); s != "" {
		b.WriteString("\n\n" + s)
	}
	return b.String()
}

// PlanPrompt is the user message of the leader's plan call.
func PlanPrompt(question string) string {
	return "The person's message:\n<message>\n" + strings.TrimSpace(question) + "\n</message>"
}

// ParsePlan reads the leader's plan (see PlanSchema) and returns the
// assignments of the known members, in the order of members; a member
// given an empty task is asked question, one given several tasks gets them
// joined. It fails when the text holds no JSON, or no assignment names a
// member.
func ParsePlan(text string, members []hooks.AgentName, question string) ([]Assignment, error) {
	v, err := planValue(text)
	if err != nil {
		return nil, err
	}
	items := planItems(v)
	if len(items) == 0 {
		return nil, errors.New("the plan assigns nothing")
	}
	byName := make(map[string]hooks.AgentName, len(members))
	for _, m := range members {
		byName[strings.ToLower(string(m))] = m
	}
	tasks := make(map[hooks.AgentName][]string)
	var unknown []string
	for _, it := range items {
		name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(it.member), "@"))
		if i := strings.IndexByte(name, ':'); i > 0 { // a user id: @name:server
			name = name[:i]
		}
		m, ok := byName[name]
		if !ok {
			unknown = append(unknown, it.member)
			continue
		}
		if t := strings.TrimSpace(it.task); t != "" && !slices.Contains(tasks[m], t) {
			tasks[m] = append(tasks[m], t)
		} else if _, seen := tasks[m]; !seen {
			tasks[m] = nil
		}
	}
	var out []Assignment
	for _, m := range members {
		ts, ok := tasks[m]
		if !ok {
			continue
		}
		task := strings.Join(ts, "\n\n")
		if task == "" {
			task = question
		}
		out = append(out, Assignment{Member: m, Task: task})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the plan names no member of the team (it names %s)", strings.Join(unknown, ", "))
	}
	return out, nil
}

type planItem struct{ member, task string }

// planValue finds the JSON value in the leader's text: the text itself,
// the inside of a code fence, or the first object or array in it.
func planValue(text string) (any, error) {
	s := strings.TrimSpace(text)
	if i := strings.Index(s, "```"); i >= 0 {
		inner := s[i+3:]
		if nl := strings.IndexByte(inner, '\n'); nl >= 0 {
			inner = inner[nl+1:]
		}
		if j := strings.Index(inner, "```"); j >= 0 {
			inner = inner[:j]
		}
		s = inner
	}
	for start := 0; start < len(s); {
		i := strings.IndexAny(s[start:], "{[")
		if i < 0 {
			break
		}
		dec := json.NewDecoder(strings.NewReader(s[start+i:]))
		var v any
		if err := dec.Decode(&v); err == nil {
			return v, nil
		}
		start += i + 1
	}
	return nil, errors.New("the plan holds no JSON object")
}

// planItems reads the assignments out of whichever shape the plan took.
func planItems(v any) []planItem {
	switch v := v.(type) {
	case []any:
		var out []planItem
		for _, e := range v {
			switch e := e.(type) {
			case string:
				out = append(out, planItem{member: e})
			case map[string]any:
				it := planItem{member: firstString(e, "member", "agent", "name", "to", "who"),
					task: firstString(e, "task", "question", "prompt", "ask", "message")}
				if it.member != "" {
					out = append(out, it)
				}
			}
		}
		return out
	case map[string]any:
		for _, k := range []string{"assignments", "tasks", "members", "plan", "delegations", "agents"} {
			if list, ok := v[k]; ok {
				return planItems(list)
			}
		}
		// {"searcher": "task", …}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var out []planItem
		for _, k := range keys {
			if t, ok := v[k].(string); ok {
				out = append(out, planItem{member: k, task: t})
			}
		}
		return out
	}
	return nil
}

func firstString(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && strings.TrimSpace(s) != "" {
			return s
		}
	}
	return ""
}

// SynthesisSystem is what the leader is told before it writes the team's
// reply.
func SynthesisSystem(d Definition) string {
	d = d.WithDefaults()
	s := fmt.Sprintf("You lead the team %q. Your members have worked on a person's message; write the team's reply to the person from their answers. "+
		"Combine them into one answer: keep what is right, resolve disagreements, and say which member a point comes from when that matters. "+
		"If a member could not answer, mention what is missing only when it matters to the person.", d.DisplayName)
	if in := strings.TrimSpace(d.Instructions); in != "" {
		s += "\n\n" + in
	}
	return s
}

// SynthesisPrompt is the user message of the leader's synthesis call: the
// person's message and every member's contribution (its task when it was
// not the message itself, its answer, or why it has none).
func SynthesisPrompt(question string, contributions []Contribution) string {
	var b strings.Builder
	question = strings.TrimSpace(question)
	b.WriteString("The person's message:\n<message>\n" + question + "\n</message>\n\nYour members' answers:\n")
	for _, c := range contributions {
		status := "answered"
		if c.Failed() {
			status = "failed"
		}
		fmt.Fprintf(&b, "\n<member name=%q status=%q>\n", string(c.Member), status)
		if t := strings.TrimSpace(c.Task); t != "" && t != question {
			b.WriteString("<task>\n" + t + "\n</task>\n")
		}
		if c.Failed() {
			b.WriteString("<error>\nThe member could not answer: " + strings.TrimSpace(c.Err) + "\n</error>\n")
		} else {
			b.WriteString("<answer>\n" + cmp.Or(strings.TrimSpace(c.Text), "(an empty answer)") + "\n</answer>\n")
		}
		b.WriteString("</member>\n")
	}
	b.WriteString("\nWrite the team's reply now.")
	return b.String()
}

// RenderContribution is a member's contribution as its own message in the
// thread (ShowSeparate), headed by its display name (display[member], or
// the member's name).
func RenderContribution(c Contribution, display map[hooks.AgentName]string) string {
	name := cmp.Or(display[c.Member], string(c.Member))
	if c.Failed() {
		return "⚠️ **" + name + "** could not answer: " + strings.TrimSpace(c.Err)
	}
	return "**" + name + "**\n\n" + cmp.Or(strings.TrimSpace(c.Text), "(no answer)")
}

// RenderFolded is the team's reply with the members' contributions folded
// in (ShowFolded): a quoted section per member, headed by its display
// name, then the synthesis.
func RenderFolded(res Result, display map[hooks.AgentName]string) string {
	var b bytes.Buffer
	for _, c := range res.Contributions {
		name := cmp.Or(display[c.Member], string(c.Member))
		if c.Failed() {
			fmt.Fprintf(&b, "> ⚠️ **%s** could not answer: %s\n\n", name, oneLine(c.Err))
			continue
		}
		fmt.Fprintf(&b, "> **%s**\n>\n", name)
		for line := range strings.Lines(cmp.Or(strings.TrimSpace(c.Text), "(no answer)")) {
			line = strings.TrimRight(line, "\r\n")
			if line == "" {
				b.WriteString(">\n")
			} else {
				b.WriteString("> " + line + "\n")
			}
		}
		b.WriteString("\n")
	}
	b.WriteString(strings.TrimSpace(res.Synthesis))
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
