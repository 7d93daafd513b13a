package config_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

func TestSubstitution(t *testing.T) {
	tests := []struct {
		name  string
		value string // written as plugins[0].settings.v
		env   map[string]string
		want  any
	}{
		{"set", "${WORD}", map[string]string{"WORD": "hello"}, "hello"},
		{"set inside text", "pre-${WORD}-post", map[string]string{"WORD": "mid"}, "pre-mid-post"},
		{"two references", "${A}${B}", map[string]string{"A": "x", "B": "y"}, "xy"},
		{"set but empty", `"${EMPTY}"`, map[string]string{"EMPTY": ""}, ""},
		{"unquoted empty result stays a string", "${EMPTY}", map[string]string{"EMPTY": ""}, ""},
		{"default when unset", "${UNSET:-fallback}", nil, "fallback"},
		{"default when empty", "${EMPTY:-fallback}", map[string]string{"EMPTY": ""}, "fallback"},
		{"value wins over default", "${WORD:-fallback}", map[string]string{"WORD": "hello"}, "hello"},
		{"empty default", "${UNSET:-}", nil, ""},
		{"default with spaces and colons", "${UNSET:-http://x:1/a b}", nil, "http://x:1/a b"},
		{"escaped reference", "$${HOME}", map[string]string{"HOME": "/root"}, "${HOME}"},
		{"escaped then real", "$${A} ${A}", map[string]string{"A": "1"}, "${A} 1"},
		{"dollars without brace stay", "price $5 and $$x", nil, "price $5 and $$x"},
		{"unquoted result is typed", "${PORT:-8080}", nil, 8080},
		{"unquoted bool result is typed", "${FLAG}", map[string]string{"FLAG": "true"}, true},
		{"quoted result stays a string", `"${PORT:-8080}"`, nil, "8080"},
		{"value with YAML syntax stays a scalar", "${LIST}", map[string]string{"LIST": "[a, b]"}, "[a, b]"},
		{"no substitution inside the default", "${UNSET:-${HOME}}", map[string]string{"HOME": "/root"}, "${HOME}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := minimal + "plugins:\n  - path: ./p\n    settings:\n      v: " + tt.value + "\n"
			c := mustParse(t, src, tt.env)
			if got := c.Plugins[0].Settings["v"]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("settings.v = %#v (%T), want %#v (%T)", got, got, tt.want, tt.want)
			}
		})
	}
}

func TestSubstitutionEverywhere(t *testing.T) {
	env := map[string]string{
		"HS": "https://matrix.example.org", "KEY": "sk-1", "ROOM": "lobby", "N": "7",
		"USER": "@alice:example.org", "DEEP": "deep-value", "PRIO": "-5",
	}
	src := minimal + `  server_name: ${SERVER:-example.org}
models:
  gpt: {model: gpt-4o, api_key: "${KEY}", base_url: "${HS}/v1"}
rooms:
  lobby: {}
agents:
  a:
    rooms: ["${ROOM}"]
authorization:
  global_users: ["${USER}"]
hooks:
  max_depth: ${N}
plugins:
  - ${PLUGIN_DIR:-./plugins/x}
  - path: ./y
    hooks:
      h:
        priority: "${PRIO}"
    settings:
      nested:
        list:
          - {inner: "${DEEP}"}
          - "${N}"
`
	// A quoted ${PRIO} stays a string, so the priority is a type error:
	// substitution never changes what the author quoted.
	errs := parseErrors(t, src, env)
	if want := []string{`config.yaml:20: plugins[1].hooks.h.priority: expected an integer, got "${PRIO}" (after substitution)`}; !reflect.DeepEqual(errs, want) {
		t.Fatalf("errors = %q, want %q", errs, want)
	}

	c := mustParse(t, strings.Replace(src, `"${PRIO}"`, "${PRIO}", 1), env)
	checks := []struct {
		name      string
		got, want any
	}{
		{"matrix.server_name", c.Matrix.ServerName, "example.org"},
		{"models.gpt.api_key", c.Models["gpt"].APIKey.Reveal(), "sk-1"},
		{"models.gpt.base_url", c.Models["gpt"].BaseURL, "https://matrix.example.org/v1"},
		{"agents.a.rooms", c.Agents["a"].Rooms, []string{"lobby"}},
		{"authorization.global_users[0]", string(c.Authorization.GlobalUsers[0]), "@alice:example.org"},
		{"hooks.max_depth", c.Hooks.MaxDepth, 7},
		{"plugins[0]", c.Plugins[0].Path, "./plugins/x"},
		{"plugins[1].hooks.h.priority", *c.Plugins[1].Hooks["h"].Priority, -5},
		{"plugins[1].settings.nested", c.Plugins[1].Settings["nested"], map[string]any{
			"list": []any{map[string]any{"inner": "deep-value"}, "7"},
		}},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
}

func TestSubstitutionDoesNotTouchKeys(t *testing.T) {
	c := mustParse(t, minimal+"plugins:\n  - path: ./p\n    settings:\n      ${KEY}: v\n", map[string]string{"KEY": "k"})
	if _, ok := c.Plugins[0].Settings["${KEY}"]; !ok {
		t.Errorf("mapping key was substituted: %#v", c.Plugins[0].Settings)
	}
}

func TestSubstitutionErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{{
		name: "missing variable in plugin settings",
		yaml: "plugins:\n  - path: ./p\n    settings:\n      api_key: ${OPENWEATHER_API_KEY}\n",
		want: []string{"config.yaml:6: plugins[0].settings.api_key: environment variable OPENWEATHER_API_KEY is not set"},
	}, {
		name: "missing variable in a list",
		yaml: "authorization:\n  global_users:\n    - \"@a:b\"\n    - ${ADMIN}\n",
		want: []string{"config.yaml:6: authorization.global_users[1]: environment variable ADMIN is not set"},
	}, {
		name: "each missing variable is reported",
		yaml: "log:\n  level: ${A}${B}\n",
		want: []string{
			"config.yaml:4: log.level: environment variable A is not set",
			"config.yaml:4: log.level: environment variable B is not set",
		},
	}, {
		name: "missing variable in a typed field is not also a type or validation error",
		yaml: "matrix2: 1\nhooks:\n  max_depth: ${DEPTH}\n",
		want: []string{
			`config.yaml:3: matrix2: unknown key (did you mean "matrix"?)`,
			"config.yaml:5: hooks.max_depth: environment variable DEPTH is not set",
		},
	}, {
		name: "invalid name",
		yaml: "log:\n  level: ${1ABC}\n",
		want: []string{`config.yaml:4: log.level: invalid variable reference "${1ABC}": want ${NAME} or ${NAME:-default}`},
	}, {
		name: "default without colon",
		yaml: "log:\n  level: ${LEVEL-info}\n",
		want: []string{`config.yaml:4: log.level: invalid variable reference "${LEVEL-info}": want ${NAME} or ${NAME:-default}`},
	}, {
		name: "unterminated",
		yaml: "log:\n  level: ${LEVEL\n",
		want: []string{`config.yaml:4: log.level: unterminated variable reference "${LEVEL" (write $${ for a literal ${)`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, minimal+tt.yaml, tt.env)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestMissingVariableErrorIsTyped(t *testing.T) {
	_, err := config.Parse([]byte(minimal+"models:\n  gpt:\n    model: x\n    api_key: ${OPENAI_API_KEY}\n"), "config.yaml", fakeEnv(nil))
	if !errors.Is(err, config.ErrEnvNotSet) {
		t.Errorf("errors.Is(err, ErrEnvNotSet) = false for %v", err)
	}
	var e *config.Error
	if !errors.As(err, &e) {
		t.Fatalf("errors.As(*config.Error) failed for %v", err)
	}
	want := config.Error{File: "config.yaml", Line: 6, Path: "models.gpt.api_key",
		Msg: "environment variable OPENAI_API_KEY is not set", Err: config.ErrEnvNotSet}
	if *e != want {
		t.Errorf("error = %+v, want %+v", *e, want)
	}
}

// A substituted value never appears in an error message: it may be a secret.
func TestSubstitutedValueNotInErrors(t *testing.T) {
	errs := parseErrors(t, minimal+"  sync_timeline_limit: ${LIMIT}\n", map[string]string{"LIMIT": "hunter2"})
	want := []string{`config.yaml:3: matrix.sync_timeline_limit: expected an integer, got "${LIMIT}" (after substitution)`}
	if !reflect.DeepEqual(errs, want) {
		t.Errorf("errors = %q, want %q", errs, want)
	}
}

// A value that came from ${VAR} never appears in a validation message:
// the message shows the reference as written instead.
func TestValidationMessagesMaskEnvValues(t *testing.T) {
	env := map[string]string{"ROUTER": "Sup3r-Secret-Name", "DB": "oracle-s3cret", "TRUST": "everyone-s3cret"}
	src := minimal + "  router:\n    username: ${ROUTER}\n  encryption:\n    share_keys_with: ${TRUST}\ndatabase:\n  type: ${DB}\n"
	errs := parseErrors(t, src, env)
	if len(errs) != 3 {
		t.Fatalf("errors = %q, want three", errs)
	}
	all := strings.Join(errs, "\n")
	for _, secret := range env {
		if strings.Contains(all, secret) {
			t.Errorf("a message shows %q:\n%s", secret, all)
		}
	}
	for _, ref := range []string{"${ROUTER}", "${DB}", "${TRUST}"} {
		if !strings.Contains(all, ref) {
			t.Errorf("no message names %s:\n%s", ref, all)
		}
	}
}

// A message that shows only part of a substituted value (a path cleaned, a
// URL's host) masks each variable's value on its own; the whole value is
// still shown as it was written.
func TestErrorfMasksPartsOfEnvValues(t *testing.T) {
	env := map[string]string{"DIR": "s3cret-dir", "HOST": "gw-s3cret.example.org"}
	src := minimal + "plugins:\n  - path: ./plugins/${DIR}\nmodels:\n  m:\n    provider: openai\n    model: x\n    base_url: https://${HOST}/v1\n"
	cfg, err := config.Parse([]byte(src), "config.yaml", fakeEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ args, want string }{
		{"plugin directory /srv/hookroom/plugins/s3cret-dir does not exist", "plugin directory /srv/hookroom/plugins/${DIR} does not exist"},
		{`"./plugins/s3cret-dir"`, `"./plugins/${DIR}"`},
		{"cannot reach gw-s3cret.example.org:443", "cannot reach ${HOST}:443"},
		{"https://gw-s3cret.example.org/v1 failed", "https://${HOST}/v1 failed"},
	} {
		if got := cfg.Errorf("plugins[0]", "%s", tc.args).Msg; got != tc.want {
			t.Errorf("Errorf(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
