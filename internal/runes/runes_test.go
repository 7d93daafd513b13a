package runes

import (
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 5, "hello"},
		{"hello", 4, "hell…"},
		{"héllo", 2, "h…"}, // é is two bytes: not cut in half
		{"héllo", 3, "hé…"},
		{"🛑 stop", 3, "…"},
		{"🛑 stop", 4, "🛑…"},
		{"", 0, ""},
		{"abc", 0, "…"},
	}
	for _, tt := range tests {
		got := Truncate(tt.s, tt.n)
		if got != tt.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Truncate(%q, %d) = %q is not valid UTF-8", tt.s, tt.n, got)
		}
	}
}

func TestCut(t *testing.T) {
	for n := -1; n <= 12; n++ {
		got := Cut("añb€c🛑d", n)
		if len(got) > max(n, 0) || !utf8.ValidString(got) {
			t.Errorf("Cut(_, %d) = %q: longer than %d bytes or not valid UTF-8", n, got, n)
		}
	}
}
