package process_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// TestDesignatedFieldsAreDocumented: the table "What a hook may change" in
// docs/plugin-protocol.md and the table in protocol's doc comment list, for
// every event, exactly hooks.MutableFields of its context.
func TestDesignatedFieldsAreDocumented(t *testing.T) {
	want := map[string][]string{}
	for event, c := range contextsByEvent {
		var paths []string
		for _, f := range hooks.MutableFields(c) {
			paths = append(paths, f.Path)
		}
		if len(paths) > 0 {
			want[event] = paths
		}
	}
	field := regexp.MustCompile("`([a-z_]+(?:\\.[a-z_]+)?)`")
	eventName := regexp.MustCompile("`([a-z_]+:[a-z_]+)`")

	doc, err := os.ReadFile("../../docs/plugin-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## 9. What a hook may change")
	if !ok {
		t.Fatal(`docs/plugin-protocol.md has no section "9. What a hook may change"`)
	}
	got := map[string][]string{}
	for line := range strings.Lines(table) {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var fields []string
		for _, m := range field.FindAllStringSubmatch(strings.Join(cells[2:], "|"), -1) {
			fields = append(fields, m[1])
		}
		for _, m := range eventName.FindAllStringSubmatch(cells[1], -1) {
			got[m[1]] = fields
		}
	}
	for event, paths := range want {
		if !slices.Equal(got[event], paths) {
			t.Errorf("docs/plugin-protocol.md §9, %s: %v, want %v (hooks.MutableFields)", event, got[event], paths)
		}
	}
	for event := range got {
		if _, ok := want[event]; !ok {
			t.Errorf("docs/plugin-protocol.md §9 lists fields for %s, which has none", event)
		}
	}

	src, err := os.ReadFile("protocol/fields.go")
	if err != nil {
		t.Fatal(err)
	}
	comment := map[string][]string{}
	row := regexp.MustCompile(`(?m)^//\t([a-z_:, ]+?)\s{2,}([a-z_., ]+)$`)
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		fields := strings.Split(m[2], ", ")
		for _, ev := range strings.Split(m[1], ", ") {
			comment[ev] = fields
		}
	}
	if !maps(comment, want) {
		t.Errorf("protocol/fields.go's table %v, want %v", comment, want)
	}
}

func maps(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
