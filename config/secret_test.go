package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookroom/hookroom/config"
)

func TestSecretNeverPrints(t *testing.T) {
	s := config.Secret("sk-live-123")
	outputs := map[string]string{
		"%v":         fmt.Sprintf("%v", s),
		"%s":         fmt.Sprintf("%s", s),
		"%q":         fmt.Sprintf("%q", s),
		"%+v":        fmt.Sprintf("%+v", s),
		"%#v":        fmt.Sprintf("%#v", s),
		"%x":         fmt.Sprintf("%x", s),
		"%d":         fmt.Sprintf("%d", s),
		"struct %+v": fmt.Sprintf("%+v", config.Model{APIKey: s}),
		"String":     s.String(),
	}
	j, err := json.Marshal(map[string]config.Secret{"k": s})
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(j)
	y, err := yaml.Marshal(map[string]config.Secret{"k": s})
	if err != nil {
		t.Fatal(err)
	}
	outputs["yaml"] = string(y)
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "key", s)
	outputs["slog"] = buf.String()

	for name, out := range outputs {
		if strings.Contains(out, "sk-live") {
			t.Errorf("%s leaks the secret: %s", name, out)
		}
		if !strings.Contains(out, "REDACTED") {
			t.Errorf("%s does not say REDACTED: %s", name, out)
		}
	}
	if s.Reveal() != "sk-live-123" || !s.IsSet() {
		t.Errorf("Reveal() = %q", s.Reveal())
	}
	if empty := config.Secret(""); empty.String() != "" || empty.IsSet() {
		t.Errorf("empty secret prints %q", empty.String())
	}
}

func TestRedacted(t *testing.T) {
	env := map[string]string{"WEATHER_KEY": "w-secret", "INNER": "inner-secret", "HS_TOKEN": "hs-secret"}
	src := minimal + `  registration: {token: "${HS_TOKEN}"}
models:
  gpt: {model: gpt-4o, api_key: sk-literal}
database: {type: postgres, uri: "postgres://u:pw-secret@db/h"}
plugins:
  - path: ./p
    settings:
      api_key: literal-secret
      Password: p-secret
      url: http://weather.example
      units: ${UNITS:-metric}
      nested:
        - {token: "${INNER}", name: plain}
      from_env: ${WEATHER_KEY}
`
	c := mustParse(t, src, env)
	r := c.Redacted()

	want := map[string]any{
		"api_key":  "REDACTED",
		"Password": "REDACTED",
		"url":      "http://weather.example",
		"units":    "metric", // a default written in the file is not secret
		"nested":   []any{map[string]any{"token": "REDACTED", "name": "plain"}},
		"from_env": "REDACTED",
	}
	if got := r.Plugins[0].Settings; !reflect.DeepEqual(got, want) {
		t.Errorf("redacted settings = %#v\nwant %#v", got, want)
	}
	if got := c.Plugins[0].Settings["api_key"]; got != "literal-secret" {
		t.Errorf("Redacted modified the original: api_key = %v", got)
	}

	secrets := []string{"w-secret", "inner-secret", "hs-secret", "sk-literal", "pw-secret", "literal-secret", "p-secret"}
	y, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	j, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"String": c.String(), "yaml": string(y), "json": string(j), "%v": fmt.Sprintf("%v", c), "%#v": fmt.Sprintf("%#v", c)} {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s leaks %q:\n%s", name, s, out)
			}
		}
		if !strings.Contains(out, "weather.example") {
			t.Errorf("%s lost a non-secret value:\n%s", name, out)
		}
	}
	if !strings.Contains(string(j), `"sync_timeline_limit":1000`) {
		t.Errorf("json does not use the YAML key names: %s", j)
	}
}

func TestSecretValues(t *testing.T) {
	c := &config.Config{
		Models:   map[string]config.Model{"m": {APIKey: "sk-model"}},
		Database: config.Database{URI: "postgres://hookroom:db-pw@localhost/hookroom"},
		HTTP:     config.HTTP{AdminToken: "admin-token-0123456789"},
	}
	got := c.SecretValues()
	for _, want := range []string{"sk-model", "postgres://hookroom:db-pw@localhost/hookroom", "db-pw", "admin-token-0123456789"} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretValues() = %q, lacks %q", got, want)
		}
	}
	if len(got) != 4 {
		t.Errorf("SecretValues() = %q, want exactly the 4 secrets", got)
	}
}
