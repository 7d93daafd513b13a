// Package hooktest helps plugin authors unit-test their hooks in a few lines:
// build a registry from handlers, build any event context with sensible
// defaults, and run it in its event's mode — the hook-engine counterpart of
// net/http/httptest.
package hooktest
