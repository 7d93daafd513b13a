// Package admin serves hookroom's one HTTP listener: GET /healthz (the
// process is alive), GET /readyz (every account caught up, the database
// answers, plugins loaded; 503 with the reasons otherwise), GET /metrics
// (Prometheus) and, guarded by a bearer token, the admin API under /api/v1/
// (hooks, agents, plugins, reload). Without a token the admin API is off
// and answers 404.
//
// The package knows nothing of the running server: a Backend (implemented
// by bot) answers every question. It imports only hooks, for the hook
// listing's type.
package admin
