// Package browsertest drives a real headless Chromium from Go tests, with
// chromedp: Debian's chromium package (/usr/bin/chromium), started once per
// test with flags that work as root in CI (--no-sandbox, --headless=new,
// --disable-gpu, --disable-dev-shm-usage) and ended when the test ends.
//
// New fails the test loudly when Chromium is missing — it never skips — so
// a machine without it cannot pass a browser test by accident. Install it
// with `apt-get install chromium`, or point HOOKROOM_CHROMIUM at another
// Chromium or Chrome binary. Tests that use it are end-to-end tests: skip
// them under `go test -short`, the project's hermetic unit tier.
//
// Watch records what a page must not do: open a JavaScript dialog (alert,
// confirm, prompt — the sign of injected script), throw, log an error, or
// violate its Content-Security-Policy (caught by a securitypolicyviolation
// listener added to every document, and by the browser's own log).
package browsertest
