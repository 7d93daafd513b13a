package testkit

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRepoFile(t *testing.T) {
	for _, tc := range []struct {
		rel     string
		wantErr bool
	}{
		{rel: "scripts/test.sh"},
		{rel: "internal/testkit/repo.go"},
		{rel: "scripts/no-such-script.sh", wantErr: true},
	} {
		got, err := RepoFile(tc.rel)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), tc.rel) {
				t.Errorf("RepoFile(%q) = %q, %v; want an error naming it", tc.rel, got, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("RepoFile(%q): %v", tc.rel, err)
			continue
		}
		if !filepath.IsAbs(got) || !strings.HasSuffix(got, filepath.FromSlash(tc.rel)) {
			t.Errorf("RepoFile(%q) = %q, want an absolute path ending in it", tc.rel, got)
		}
		if _, err := os.Stat(filepath.Join(strings.TrimSuffix(got, filepath.FromSlash(tc.rel)), "go.mod")); err != nil {
			t.Errorf("RepoFile(%q) = %q: no go.mod at its root: %v", tc.rel, got, err)
		}
	}
}
