package hooks

import (
	"encoding/json"
	"fmt"
)

// Settings are a plugin's settings from config.yaml, shared read-only by all
// of its hooks. Scalars are read with the typed getters; structured
// settings are decoded into a struct of the plugin's own with Decode.
type Settings struct {
	raw json.RawMessage
	m   map[string]any
}

// NewSettings captures m (as decoded from YAML or JSON) as plugin settings.
// The map is copied through JSON, so later changes to m are not seen and
// values are normalized to JSON types (numbers become float64).
func NewSettings(m map[string]any) (Settings, error) {
	if len(m) == 0 {
		return Settings{}, nil
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return Settings{}, fmt.Errorf("failed to encode plugin settings: %w", err)
	}
	var copied map[string]any
	if err := json.Unmarshal(raw, &copied); err != nil {
		return Settings{}, fmt.Errorf("failed to decode plugin settings: %w", err)
	}
	return Settings{raw: raw, m: copied}, nil
}

// Len returns the number of top-level settings.
func (s Settings) Len() int { return len(s.m) }

// Has reports whether key is set.
func (s Settings) Has(key string) bool {
	_, ok := s.m[key]
	return ok
}

// String returns the setting key as a string, or "" when it is unset or not a string.
func (s Settings) String(key string) string {
	v, _ := s.m[key].(string)
	return v
}

// Bool returns the setting key as a bool, or false.
func (s Settings) Bool(key string) bool {
	v, _ := s.m[key].(bool)
	return v
}

// Int returns the setting key as an int, or 0 when it is unset or not a whole number.
func (s Settings) Int(key string) int {
	f, ok := s.m[key].(float64)
	if !ok || f != float64(int(f)) {
		return 0
	}
	return int(f)
}

// Float returns the setting key as a float64, or 0.
func (s Settings) Float(key string) float64 {
	v, _ := s.m[key].(float64)
	return v
}

// Strings returns the setting key as a list of strings; elements that are
// not strings are skipped.
func (s Settings) Strings(key string) []string {
	list, _ := s.m[key].([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		if str, ok := e.(string); ok {
			out = append(out, str)
		}
	}
	return out
}

// Decode unmarshals all settings into v (a pointer to a struct or map).
func (s Settings) Decode(v any) error {
	if len(s.raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(s.raw, v); err != nil {
		return fmt.Errorf("failed to decode plugin settings: %w", err)
	}
	return nil
}

// JSON returns the settings as a JSON object ("{}" when empty).
func (s Settings) JSON() json.RawMessage {
	if len(s.raw) == 0 {
		return json.RawMessage("{}")
	}
	return append(json.RawMessage(nil), s.raw...)
}
