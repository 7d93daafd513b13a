package process

import (
	"encoding/json"
	"testing"
)

func TestPluginOutputMasksSecrets(t *testing.T) {
	p := &Plugin{mask: secretMasker([]string{"short", "tok-123456", "tok-123456-longer", "sk-abcdefgh"})}
	for _, tc := range []struct{ in, want string }{
		{"nothing secret here", "nothing secret here"},
		{"key sk-abcdefgh!", "key [REDACTED]!"},
		{"a tok-123456-longer one", "a [REDACTED] one"}, // the longer secret, whole
		{"tok-123456 and tok-123456", "[REDACTED] and [REDACTED]"},
		{"short values are no secret", "short values are no secret"},
	} {
		if got := p.redact(tc.in); got != tc.want {
			t.Errorf("redact(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		in   any
		want any
	}{
		{"token sk-abcdefgh", "token [REDACTED]"},
		{42.0, 42.0},
		{map[string]any{"nested": []any{"sk-abcdefgh"}}, redactedText},
		{map[string]any{"fine": "value"}, map[string]any{"fine": "value"}},
	} {
		got := p.redactField(tc.in)
		if mustString(got) != mustString(tc.want) {
			t.Errorf("redactField(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	none := &Plugin{mask: secretMasker([]string{"", "tiny"})}
	if none.mask != nil || none.redact("tiny") != "tiny" {
		t.Error("a plugin without secrets of 6 bytes or more masks something")
	}
}

func mustString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}
