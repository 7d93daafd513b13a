package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
)

// redacted is what a Secret prints instead of its value.
const redacted = "REDACTED"

// Secret is a string that must not be logged: API keys, registration shared
// secrets and tokens. Printing it with fmt, marshalling it to YAML or JSON, or
// logging it with slog yields "REDACTED" (or "" when it is empty, so that an
// unset secret is still visible as unset). Call Reveal for the value.
type Secret string

var (
	_ fmt.Stringer   = Secret("")
	_ fmt.Formatter  = Secret("")
	_ json.Marshaler = Secret("")
	_ slog.LogValuer = Secret("")
)

// Reveal returns the secret value. Call it only where the value is used,
// never to log it.
func (s Secret) Reveal() string { return string(s) }

// IsSet reports whether the secret is non-empty.
func (s Secret) IsSet() bool { return s != "" }

func (s Secret) mask() string {
	if s == "" {
		return ""
	}
	return redacted
}

// String returns "REDACTED", or "" for an empty secret.
func (s Secret) String() string { return s.mask() }

// GoString is used by %#v.
func (s Secret) GoString() string { return fmt.Sprintf("config.Secret(%q)", s.mask()) }

// Format makes every fmt verb print the masked form.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			fmt.Fprint(f, s.GoString())
			return
		}
		fmt.Fprint(f, s.mask())
	case 'q':
		fmt.Fprintf(f, "%q", s.mask())
	default:
		fmt.Fprint(f, s.mask())
	}
}

// MarshalYAML writes the masked form.
func (s Secret) MarshalYAML() (any, error) { return s.mask(), nil }

// MarshalJSON writes the masked form.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.mask()) }

// LogValue masks the secret in slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.mask()) }

// SecretValues returns the value of every Secret in c, and the password of
// those that are URLs with one (a database URI): what must never reach a
// log line or a plugin's output. Empty secrets are left out.
func (c *Config) SecretValues() []string {
	var out []string
	secretType := reflect.TypeFor[Secret]()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Map:
			for it := v.MapRange(); it.Next(); {
				walk(it.Value())
			}
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				walk(v.Index(i))
			}
		case reflect.String:
			if v.Type() != secretType || v.Len() == 0 {
				return
			}
			out = append(out, v.String())
			if u, err := url.Parse(v.String()); err == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && pw != "" {
					out = append(out, pw)
				}
			}
		}
	}
	walk(reflect.ValueOf(c))
	return out
}
