package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

// Backend answers the listener's questions about the running server.
// Every method is called on a request's goroutine and must be safe for
// concurrent use.
type Backend interface {
	// Ready returns why the server is not ready (empty when it is).
	Ready(ctx context.Context) []string
	// Hooks lists every hook in service (the view of hookroom hooks --json).
	Hooks() []hooks.HookInfo
	// Agents lists the managed accounts: the router and every agent.
	Agents() []Agent
	// Plugins lists the loaded plugins.
	Plugins() []Plugin
	// Reload reads config.yaml again and applies it, like an edit of the
	// file would.
	Reload(ctx context.Context) ReloadResult
}

// Agent is one managed Matrix account, as GET /api/v1/agents lists it.
type Agent struct {
	// Name is the agent's name ("router" for the router).
	Name   string `json:"name"`
	Router bool   `json:"router,omitempty"`
	UserID string `json:"user_id"`
	// Rooms are the rooms the account is in (configured and invited).
	Rooms []string `json:"rooms"`
	// State is "starting" until the account's first sync caught up, then
	// "ready".
	State string `json:"state"`
	Model string `json:"model,omitempty"`
}

// Agent states.
const (
	AgentStarting = "starting"
	AgentReady    = "ready"
)

// Plugin is one loaded plugin, as GET /api/v1/plugins lists it.
type Plugin struct {
	Name string `json:"name"`
	// Kind is "builtin" or "process".
	Kind   string `json:"kind"`
	Source string `json:"source"`
	// State is the process plugin's state (running, restarting, disabled,
	// closed); "loaded" for built-ins.
	State string `json:"state"`
	// Restarts counts a process plugin's restarts after crashes.
	Restarts int      `json:"restarts"`
	PID      int      `json:"pid,omitempty"`
	Hooks    []string `json:"hooks,omitempty"`
	Tools    []string `json:"tools,omitempty"`
}

// ReloadResult is what POST /api/v1/reload answers.
type ReloadResult struct {
	// OK is set when the new configuration is in service.
	OK bool `json:"ok"`
	// Summary says what changed in one line ("agents +ops; plugins:
	// restarted geo").
	Summary string `json:"summary,omitempty"`
	// Report is the full reload report.
	Report any `json:"report,omitempty"`
	// Errors are the problems that kept the configuration from loading
	// (file:line, secrets masked); the running configuration stays.
	Errors []string `json:"errors,omitempty"`
}

// Options configure a Server.
type Options struct {
	Backend Backend
	// Metrics serves GET /metrics; nil: 404.
	Metrics http.Handler
	// Token returns the admin API's bearer token at the time of each
	// request (it reloads live); "" turns the admin API off (404).
	Token func() string
	// Console, when set, is the operator console, served at / (every path
	// the listener's own routes do not take). It guards itself.
	Console http.Handler
}

// Handler returns the listener's routes.
func Handler(o Options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		reasons := o.Backend.Ready(ctx)
		if len(reasons) > 0 {
			writeJSON(w, http.StatusServiceUnavailable, map[string]any{"ready": false, "reasons": reasons})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"ready": true})
	})
	if o.Metrics != nil {
		mux.Handle("GET /metrics", o.Metrics)
	}
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/hooks", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, o.Backend.Hooks())
	})
	api.HandleFunc("GET /api/v1/agents", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, o.Backend.Agents())
	})
	api.HandleFunc("GET /api/v1/plugins", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, o.Backend.Plugins())
	})
	api.HandleFunc("POST /api/v1/reload", func(w http.ResponseWriter, r *http.Request) {
		res := o.Backend.Reload(r.Context())
		status := http.StatusOK
		if !res.OK {
			status = http.StatusUnprocessableEntity
		}
		writeJSON(w, status, res)
	})
	mux.Handle("/api/", guard(o.Token, api))
	if o.Console != nil {
		mux.Handle("/", o.Console)
	}
	return mux
}

// guard lets a request through to next only with the right bearer token.
// Without a token configured the admin API does not exist (404); a
// missing or wrong token is 401 with a WWW-Authenticate challenge. Tokens
// are compared in constant time (of their SHA-256, so the length does not
// leak either).
func guard(token func() string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := ""
		if token != nil {
			want = token()
		}
		if want == "" {
			http.NotFound(w, r)
			return
		}
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok || !equalTokens(got, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookroom"`)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "missing or wrong bearer token"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func equalTokens(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Server is the running listener.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Listen binds addr and serves the routes of o on it until Shutdown. A
// failure to bind is returned at once, naming the address.
func Listen(ctx context.Context, addr string, o Options) (*Server, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s (http.listen): %w", addr, err)
	}
	log := zerolog.Ctx(ctx)
	s := &Server{
		ln: ln, done: make(chan struct{}),
		srv: &http.Server{
			Handler:           Handler(o),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      2 * time.Minute, // a reload may take a while
			IdleTimeout:       2 * time.Minute,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          newErrorLog(log),
			BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		},
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Str("address", addr).Msg("HTTP listener stopped")
		}
	}()
	log.Info().Str("address", ln.Addr().String()).Msg("HTTP listener started")
	return s, nil
}

// Addr is the address the listener is bound to (with the port chosen for
// ":0").
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Shutdown stops accepting requests and waits for those in flight until
// ctx ends, then closes the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	<-s.done
	return err
}
