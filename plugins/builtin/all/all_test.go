package all_test

import (
	"testing"

	"github.com/hookroom/hookroom/plugins"
	_ "github.com/hookroom/hookroom/plugins/builtin/all"
)

func TestEveryBuiltinIsRegistered(t *testing.T) {
	var names []string
	for _, b := range plugins.Builtins() {
		names = append(names, b.Name)
		if b.Description == "" {
			t.Errorf("built-in %s has no description", b.Name)
		}
	}
	want := []string{"audit_log", "context_info", "knowledge", "memory", "tool_guard"}
	if len(names) != len(want) {
		t.Fatalf("built-ins %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("built-ins %q, want %q", names, want)
		}
	}
}
