package config_test

import (
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

func TestHTTPPublicURL(t *testing.T) {
	head := minimal + "http:\n  listen: 127.0.0.1:8080\n  public_url: "
	if c := mustParse(t, head+"https://hookroom.example.org\n", nil); c.HTTP.PublicURL != "https://hookroom.example.org" {
		t.Errorf("public_url = %q", c.HTTP.PublicURL)
	}
	for _, bad := range []string{"ftp://hookroom.example.org", "hookroom.example.org", "https://"} {
		errs := parseErrors(t, head+bad+"\n", nil)
		if len(errs) != 1 || !strings.Contains(errs[0], "http.public_url") || !strings.Contains(errs[0], "config.yaml:") {
			t.Errorf("public_url %q: errors %q, want one naming http.public_url at its line", bad, errs)
		}
	}
	old := mustParse(t, head+"https://a.example.org\n", nil)
	next := mustParse(t, head+"https://b.example.org\n", nil)
	if ch := config.Diff(old, next); !ch.PublicURL || !strings.Contains(ch.String(), "http.public_url") {
		t.Errorf("Diff = %+v (%s), want http.public_url changed", ch, ch.String())
	}
}
