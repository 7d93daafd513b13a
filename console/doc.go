// Package console is the operator's console: server-rendered pages on the
// HTTP listener that show what the running server is doing and let an
// operator act on it — the overview (readiness, accounts, rooms, plugins,
// MCP servers, reloads), the conversations and the turn inspector (every
// hook's mode, duration, effect and change, each model request and tool
// call, approvals, delivery), the hooks with their live statistics, token
// usage and budgets, schedules, pending approvals, the config.yaml editor
// and the recent log lines.
//
// It owns the pages (written in Go through a small HTML writer, htmlWriter:
// no template engine, so that linking the console does not make the linker
// keep every exported method of the binary for reflection), the embedded
// assets (a hand-written stylesheet, a small console.js and htmx, vendored
// at a pinned version in assets/ — no CDN, no build step, no Node), the
// sessions, the CSRF tokens, the sign-in rate limit, the SVG charts and
// LogBuffer. It reads the server only through the small interfaces of
// Options (one per page), which bot implements; it holds no file, database
// or Matrix logic of its own. admin mounts New's handler at "/" of the
// listener, next to /api/v1.
//
// # Security model
//
//   - Off without an admin token: while Options.Token returns "", every
//     route, assets included, answers 404.
//   - Sign-in exchanges the admin token for a session: a 32-byte random id
//     in a cookie that is HttpOnly, SameSite=Strict, Path=/ and Secure when
//     the request came over TLS or Options.PublicURL is https. Sessions
//     live in memory only (a restart signs everyone out), expire after
//     Options.SessionTTL (12h by default), and end when the admin token
//     changes. Failed sign-ins are logged (never what was typed) and
//     limited to 5 per minute per client address, then 429 with
//     Retry-After.
//   - Without a session a page view is redirected to /signin?next=… (a
//     local path only); a live update (HX-Request) or a POST gets 401.
//   - Every POST needs the session's CSRF token, compared in constant time:
//     a hidden form field, or the X-CSRF-Token header that htmx sends (set
//     with hx-headers on <body>). The sign-in form has its own, double
//     submitted in a cookie. Without it: 403.
//   - Every response carries a Content-Security-Policy without
//     'unsafe-inline' or 'unsafe-eval' (ContentSecurityPolicy): the pages
//     have no inline script, style attribute or event handler; htmx runs
//     with eval and script tags off. Pages are Cache-Control: no-store,
//     with nosniff, Referrer-Policy no-referrer and no framing.
//   - Everything a person or a plugin can write (room names, message
//     bodies, tool arguments, hook errors, log lines) is printed through
//     htmlWriter's escaping methods as text, attribute values always
//     quoted; only constant markup in the code is written unescaped, and
//     links are local paths or matrix.to links built from escaped ids,
//     never a backend string. Charts and the turn timeline are SVG whose
//     geometry the console computes and whose labels are escaped text.
//   - The console never asks the server for a secret: config.yaml reaches
//     it masked, tool arguments and log lines are masked before they are
//     recorded, and the admin token is never rendered.
package console
