package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookroom/hookroom/admin"
	"github.com/hookroom/hookroom/hooks"
)

const token = "0123456789abcdef-admin"

type fakeBackend struct {
	reasons []string
	reloads atomic.Int32
}

func (f *fakeBackend) Ready(context.Context) []string { return f.reasons }
func (f *fakeBackend) Hooks() []hooks.HookInfo {
	return []hooks.HookInfo{{Event: "message:received", Plugin: "audit", Hook: "log", Priority: 100, Timeout: time.Second}}
}
func (f *fakeBackend) Agents() []admin.Agent {
	return []admin.Agent{{Name: "helper", UserID: "@helper:example.org", Rooms: []string{"!a:example.org"}, State: admin.AgentReady}}
}
func (f *fakeBackend) Plugins() []admin.Plugin {
	return []admin.Plugin{{Name: "geo", Kind: "process", State: "running", Restarts: 1}}
}
func (f *fakeBackend) Reload(context.Context) admin.ReloadResult {
	f.reloads.Add(1)
	return admin.ReloadResult{OK: true, Summary: "nothing changed"}
}

func TestRoutes(t *testing.T) {
	type tokenCase struct {
		name       string
		configured string // the admin token in config
		header     string // Authorization
	}
	var (
		right   = tokenCase{"right token", token, "Bearer " + token}
		lower   = tokenCase{"scheme in lower case", token, "bearer " + token}
		missing = tokenCase{"no header", token, ""}
		wrong   = tokenCase{"wrong token", token, "Bearer " + token + "x"}
		prefix  = tokenCase{"prefix of the token", token, "Bearer " + token[:16]}
		basic   = tokenCase{"basic auth", token, "Basic " + token}
		off     = tokenCase{"admin API off", "", "Bearer " + token}
	)
	tests := []struct {
		method, path string
		tokens       []tokenCase
		want         int
		body         string // a substring of the body
	}{
		{"GET", "/healthz", []tokenCase{missing, off}, 200, "ok"},
		{"GET", "/readyz", []tokenCase{missing}, 200, `"ready": true`},
		{"GET", "/metrics", []tokenCase{missing, off}, 200, "test_metric 1"},
		{"POST", "/healthz", []tokenCase{missing}, 405, ""},
		{"GET", "/nothing", []tokenCase{right}, 404, ""},
		{"GET", "/api/v1/hooks", []tokenCase{right, lower}, 200, `"plugin": "audit"`},
		{"GET", "/api/v1/agents", []tokenCase{right}, 200, `"user_id": "@helper:example.org"`},
		{"GET", "/api/v1/plugins", []tokenCase{right}, 200, `"restarts": 1`},
		{"POST", "/api/v1/reload", []tokenCase{right}, 200, `"summary": "nothing changed"`},
		{"GET", "/api/v1/reload", []tokenCase{right}, 405, ""},
		{"GET", "/api/v1/unknown", []tokenCase{right}, 404, ""},
		{"GET", "/api/v1/hooks", []tokenCase{missing, wrong, prefix, basic}, 401, "missing or wrong bearer token"},
		{"POST", "/api/v1/reload", []tokenCase{missing, wrong}, 401, ""},
		{"GET", "/api/v1/unknown", []tokenCase{missing}, 401, ""},
		{"GET", "/api/v1/hooks", []tokenCase{off}, 404, ""},
		{"POST", "/api/v1/reload", []tokenCase{off}, 404, ""},
	}
	for _, tt := range tests {
		for _, tc := range tt.tokens {
			t.Run(tt.method+" "+tt.path+" "+tc.name, func(t *testing.T) {
				be := &fakeBackend{}
				h := admin.Handler(admin.Options{
					Backend: be,
					Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("test_metric 1\n")) }),
					Token:   func() string { return tc.configured },
				})
				req := httptest.NewRequest(tt.method, tt.path, nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tt.want {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
				}
				if !strings.Contains(rec.Body.String(), tt.body) {
					t.Errorf("body %q does not contain %q", rec.Body, tt.body)
				}
				if tt.want == 401 && rec.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
				if strings.Contains(rec.Body.String(), token) {
					t.Error("the token is in the answer")
				}
				if n := be.reloads.Load(); n > 0 && rec.Code != 200 {
					t.Errorf("a refused request reloaded %d times", n)
				}
			})
		}
	}
}

func TestNotReady(t *testing.T) {
	h := admin.Handler(admin.Options{Backend: &fakeBackend{reasons: []string{"account @a:x has not caught up yet", "database: connection refused"}}})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 503 {
		t.Fatalf("status %d, want 503", rec.Code)
	}
	var body struct {
		Ready   bool     `json:"ready"`
		Reasons []string `json:"reasons"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Ready || len(body.Reasons) != 2 {
		t.Errorf("body = %+v, want not ready with both reasons", body)
	}
}

func TestListenAddressInUse(t *testing.T) {
	s, err := admin.Listen(t.Context(), "127.0.0.1:0", admin.Options{Backend: &fakeBackend{}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	addr := s.Addr().String()
	_, err = admin.Listen(t.Context(), addr, admin.Options{Backend: &fakeBackend{}})
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("second Listen on %s: err = %v, want one naming the address and http.listen", addr, err)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("healthz = %d", resp.StatusCode)
	}
}
