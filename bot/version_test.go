package bot

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/internal/buildinfo"
	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/metrics/metricstest"
)

// hookroom_build_info names the build as hookroom version does (the line
// buildinfo.Info.String makes): a source build is "dev" in both (it was an
// empty label), a stamped one its version, and the revision agrees too.
func TestBuildInfoAgreesWithVersion(t *testing.T) {
	for _, stamp := range []struct{ version, revision string }{
		{"", ""},
		{"v1.2.3", "0123456789abcdef0123456789abcdef01234567"},
	} {
		oldV, oldR := buildinfo.Version, buildinfo.Revision
		buildinfo.Version, buildinfo.Revision = stamp.version, stamp.revision
		line := buildinfo.Read().String()
		build := metricsBuild()
		buildinfo.Version, buildinfo.Revision = oldV, oldR

		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "hookroom" {
			t.Fatalf("version line %q", line)
		}
		if stamp.version == "" && words[1] != buildinfo.Dev {
			t.Errorf("an unstamped build's version line %q does not say %s", line, buildinfo.Dev)
		}
		if stamp.version != "" && words[1] != "1.2.3" {
			t.Errorf("a build stamped %s has the version line %q", stamp.version, line)
		}
		rec := httptest.NewRecorder()
		metrics.New(metrics.Sources{Build: build}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		f, err := metricstest.Parse(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		want := metricstest.Labels{"version": words[1]}
		if stamp.revision != "" {
			want["revision"] = stamp.revision
		}
		if v, ok, _ := f.Value("hookroom_build_info", want); !ok || v != 1 {
			t.Errorf("hookroom_build_info has no series with %v (hookroom version: %q): %v", want, line, f.Series("hookroom_build_info", nil))
		}
	}
}
