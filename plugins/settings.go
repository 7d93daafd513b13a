package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
)

// SettingsError is a problem with one of a plugin's settings. Built-in
// plugins return it from New; the loader reports it at the line of the
// setting in config.yaml ("config.yaml:14: plugins[1].settings.rules[2].tool: …").
type SettingsError struct {
	// Path is the setting's key path below settings, in config.yaml's
	// notation: "timezone", "rules[2].arguments.path"; "" for the settings
	// as a whole.
	Path string
	Err  error
}

func (e *SettingsError) Error() string {
	if e.Path == "" {
		return "settings: " + e.Err.Error()
	}
	return "settings." + e.Path + ": " + e.Err.Error()
}

func (e *SettingsError) Unwrap() error { return e.Err }

// SettingsErrorf returns a *SettingsError for the setting at path.
func SettingsErrorf(path, format string, args ...any) *SettingsError {
	return &SettingsError{Path: path, Err: fmt.Errorf(format, args...)}
}

// DecodeSettings decodes s strictly into v (a pointer to a struct with json
// tags): a key v has no field for, or a value of the wrong type, is a
// *SettingsError naming the key.
func DecodeSettings(s hooks.Settings, v any) error {
	return DecodeStrict(s.JSON(), "", v)
}

// DecodeStrict decodes the JSON raw strictly into v; errors are
// *SettingsError values whose path starts with base.
func DecodeStrict(raw json.RawMessage, base string, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		path := base
		if te.Field != "" {
			for _, seg := range strings.Split(te.Field, ".") {
				path = JoinKey(path, seg)
			}
		}
		return &SettingsError{Path: path, Err: fmt.Errorf("must be %s, not %s", jsonTypeName(te.Type.Kind().String()), te.Value)}
	}
	if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		key, uerr := strconv.Unquote(rest)
		if uerr != nil {
			key = rest
		}
		return &SettingsError{Path: JoinKey(base, key), Err: errors.New("unknown setting")}
	}
	return &SettingsError{Path: base, Err: err}
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "a mapping"
	}
	return kind
}

// JoinKey appends a map key to a key path the way config.yaml errors
// write them (config.JoinKey): "a.b", or a["quoted key"] for keys that are
// not plain words. Plugins name the setting of a SettingsError with it.
func JoinKey(base, key string) string { return config.JoinKey(base, key) }

// JoinIndex appends a list index to a key path: "rules[2]".
func JoinIndex(base string, i int) string { return config.JoinIndex(base, i) }
