package config

import (
	"reflect"
	"strings"
)

// MaskSecrets returns s with every secret of c replaced: values that came
// from ${VAR} substitution by the ${VAR} text they were written as, and the
// literal values of Secret fields (tokens, passwords, API keys) by
// RedactedValue. Use it on text that may echo configuration values and is
// about to be shown (a tool call's arguments and result in a turn trace).
// Values shorter than 4 bytes are left alone (they would mask unrelated
// text).
func (c *Config) MaskSecrets(s string) string {
	if c == nil || s == "" {
		return s
	}
	s = maskEnv(s, c.masker)
	var pairs []string
	walkSecrets(reflect.ValueOf(c).Elem(), func(v string) {
		if len(v) >= minMaskedLen && !strings.Contains(v, "${") {
			pairs = append(pairs, v, RedactedValue)
		}
	}, 0)
	if len(pairs) == 0 {
		return s
	}
	return strings.NewReplacer(pairs...).Replace(s)
}

var secretType = reflect.TypeFor[Secret]()

// walkSecrets calls f with the value of every Secret reachable from v.
func walkSecrets(v reflect.Value, f func(string), depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkSecrets(v.Elem(), f, depth+1)
		}
	case reflect.String:
		if v.Type() == secretType {
			f(v.String())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkSecrets(v.Field(i), f, depth+1)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkSecrets(v.Index(i), f, depth+1)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			walkSecrets(it.Value(), f, depth+1)
		}
	}
}
