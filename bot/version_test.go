package bot

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/metrics"
	"github.com/hookroom/hookroom/metrics/metricstest"
)

// hookroom_build_info names the build as hookroom version does: a source
// build is "dev" in both (it was an empty label).
func TestBuildInfoAgreesWithVersion(t *testing.T) {
	words := strings.Fields(versionLine())
	if len(words) < 2 || words[0] != "hookroom" {
		t.Fatalf("version line %q", versionLine())
	}
	rec := httptest.NewRecorder()
	metrics.New(metrics.Sources{Build: metricsBuild()}).Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	f, err := metricstest.Parse(rec.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, _ := f.Value("hookroom_build_info", metricstest.Labels{"version": words[1]}); !ok || v != 1 {
		t.Errorf("hookroom_build_info has no series with version=%q (hookroom version: %q): %v", words[1], versionLine(), f.Series("hookroom_build_info", nil))
	}
}
