package bot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

// The summary !reload-plugins posts is bounded: the number of problems,
// the first three without directories, each shortened, and "and N more".
func TestReloadFailureSummary(t *testing.T) {
	var many config.ErrorList
	for i := range 7 {
		many = append(many, &config.Error{File: "/etc/hookroom/config.yaml", Line: i + 1, Path: fmt.Sprintf("agents.a%d", i), Msg: "unknown key"})
	}
	long := &config.Error{File: "/srv/very/deep/dir/plugins/p/plugin.json", Line: 3, Path: "command", Msg: strings.Repeat("x", 1000)}
	tests := []struct {
		name       string
		err        error
		want       []string
		wantAbsent []string
		maxLen     int
	}{
		{
			name:       "many problems",
			err:        fmt.Errorf("failed to reload: %w", many),
			want:       []string{"Reload failed (7 problems)", "config.yaml:1: agents.a0", "config.yaml:3: agents.a2", "and 4 more."},
			wantAbsent: []string{"/etc/hookroom", "agents.a3"},
			maxLen:     1000,
		},
		{
			name:       "one long problem",
			err:        config.ErrorList{long},
			want:       []string{"Reload failed (1 problem)", "plugin.json:3: command", "…"},
			wantAbsent: []string{"/srv/very", "and "},
			maxLen:     600,
		},
		{
			name:       "a plain error with a path",
			err:        errors.New(`failed to start plugin "p": open /home/op/plugins/p/run.sh: permission denied`),
			want:       []string{"open run.sh: permission denied"},
			wantAbsent: []string{"/home/op"},
			maxLen:     600,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := reloadFailureSummary(tt.err)
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("summary lacks %q:\n%s", w, got)
				}
			}
			for _, w := range tt.wantAbsent {
				if strings.Contains(got, w) {
					t.Errorf("summary contains %q:\n%s", w, got)
				}
			}
			if len(got) > tt.maxLen {
				t.Errorf("summary is %d bytes, want at most %d", len(got), tt.maxLen)
			}
		})
	}
}
