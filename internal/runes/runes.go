package runes

import "unicode/utf8"

// Truncate shortens s to at most n bytes, cut on a rune boundary, and marks
// the cut with "…" (which adds three bytes). s is returned unchanged when it
// fits.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Cut(s, n) + "…"
}

// Cut returns the longest prefix of s of at most n bytes that ends on a rune
// boundary, without a mark.
func Cut(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
