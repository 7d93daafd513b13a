package config_test

import (
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

func TestMaskSecrets(t *testing.T) {
	c := &config.Config{}
	c.HTTP.AdminToken = "admin-token-value-123"
	c.Matrix.Registration.SharedSecret = "shared-secret-456"
	tests := []struct {
		name, in, want string
	}{
		{"admin token", `{"q":"admin-token-value-123"}`, `{"q":"` + config.RedactedValue + `"}`},
		{"shared secret in prose", "use shared-secret-456 now", "use " + config.RedactedValue + " now"},
		{"nothing secret", "hello world", "hello world"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.MaskSecrets(tt.in)
			if got != tt.want {
				t.Errorf("MaskSecrets(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if got := (*config.Config)(nil).MaskSecrets("x"); got != "x" {
		t.Errorf("nil config masked %q", got)
	}
}

func TestMaskSecretsEnv(t *testing.T) {
	c := mustParse(t, minimal+"http:\n  listen: 127.0.0.1:0\n  admin_token: ${HOOKROOM_T_TOKEN}\n",
		map[string]string{"HOOKROOM_T_TOKEN": "from-the-environment-789"})
	got := c.MaskSecrets("token from-the-environment-789 here")
	if strings.Contains(got, "from-the-environment-789") {
		t.Errorf("env value not masked: %q", got)
	}
}
