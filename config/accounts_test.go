package config_test

import (
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

func TestExistingAccounts(t *testing.T) {
	src := minimal + `  server_name: example.org
  router:
    account:
      user_id: "${ROUTER_ID}"
      access_token: "${ROUTER_TOKEN}"
      password: "${ROUTER_PASSWORD:-}"
agents:
  helper:
    avatar: pics/helper.png
    account:
      user_id: "@helper-bot:example.org"
      password: "${HELPER_PASSWORD}"
models:
  default: {provider: echo}
`
	env := map[string]string{"ROUTER_ID": "@hr-router:example.org", "ROUTER_TOKEN": "syt_secret_token", "HELPER_PASSWORD": "hunter2-secret"}
	c := mustParse(t, src, env)
	r := c.Matrix.Router
	if r.Username != "hr-router" || r.Account.UserID != "@hr-router:example.org" || r.Account.AccessToken.Reveal() != "syt_secret_token" || r.Account.Password.IsSet() {
		t.Errorf("router = %+v", r)
	}
	h := c.Agents["helper"]
	if h.Username != "helper-bot" || h.Account.Password.Reveal() != "hunter2-secret" || h.Avatar != "pics/helper.png" {
		t.Errorf("helper = %+v", h)
	}
	if config.IsMXC(h.Avatar) || !config.IsMXC("mxc://example.org/abc") {
		t.Error("IsMXC is wrong")
	}
	// Printing the configuration never shows the secrets.
	for _, s := range []string{"syt_secret_token", "hunter2-secret"} {
		if out := c.Redacted().String(); strings.Contains(out, s) {
			t.Errorf("Redacted shows %q", s)
		}
	}

	// A bad user id from the environment is reported as written.
	env["ROUTER_ID"] = "@hr-router:elsewhere.org"
	errs := strings.Join(parseErrors(t, src, env), "\n")
	if !strings.Contains(errs, `matrix.router.account.user_id: ${ROUTER_ID} is not on matrix.server_name example.org`) {
		t.Errorf("errors:\n%s", errs)
	}
}

func TestProfileChangesAreNotMatrixChanges(t *testing.T) {
	base := minimal + "  router:\n    display_name: R\n"
	tests := []struct {
		name          string
		new           string
		matrix, route bool
	}{
		{"display name", minimal + "  router:\n    display_name: Q\n", false, true},
		{"avatar", base + "    avatar: mxc://example.org/x\n", false, true},
		{"username", base + "    username: other\n", true, false},
		{"account", base + "    account: {user_id: \"@router:example.org\", password: pw}\n", true, false},
	}
	old := mustParse(t, base, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch := config.Diff(old, mustParse(t, tt.new, nil))
			if ch.Matrix != tt.matrix || ch.RouterProfile != tt.route {
				t.Errorf("Matrix = %v, RouterProfile = %v; want %v, %v", ch.Matrix, ch.RouterProfile, tt.matrix, tt.route)
			}
		})
	}
}
