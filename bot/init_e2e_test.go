package bot

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
)

// hookroom init against the real homeserver writes a configuration that
// hookroom check accepts and that runs: the accounts are registered and
// logged in, the room is provisioned, and the invited operator joins it.
func TestInitThenCheckAndRun(t *testing.T) {
	e := newEnv(t)
	op := e.hs.RegisterUser(t, "operator")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	t.Setenv("HOOKROOM_TEST_HS_SECRET", e.hs.Secret)
	var stdout, stderr bytes.Buffer
	code := Main([]string{"init", "--homeserver", e.hs.URL, "--server-name", e.hs.ServerName, "--secret-env", "HOOKROOM_TEST_HS_SECRET",
		"--agent", e.localpart("assistant"), "--router", e.localpart("router"), "--room", e.localpart("lobby"),
		"--invite", string(op.UserID), "--listen", "127.0.0.1:0", "--config", cfgPath}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("hookroom init exited %d: %s", code, stderr.String())
	}
	if strings.Contains(stdout.String()+stderr.String(), e.hs.Secret) {
		t.Fatal("hookroom init printed the shared secret")
	}
	// The test homeserver serves no federation API (/_matrix/key/v2/server),
	// so the server name is given; TestInitWritesAValidConfig covers asking.
	if !strings.Contains(stdout.String(), "server name "+e.hs.ServerName+" (--server-name)") {
		t.Errorf("init summary:\n%s", stdout.String())
	}

	env := readEnvFile(t, filepath.Join(dir, initEnvFile))
	for k, v := range env {
		t.Setenv(k, v)
	}
	stdout.Reset()
	stderr.Reset()
	if code := Main([]string{"check", "--config", cfgPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("hookroom check exited %d: %s", code, stderr.String())
	}

	cfg, err := config.Load(context.Background(), cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e.dir = dir
	var rec events
	r := e.start(cfg, &rec, Options{})
	lobby := r.bot.w().rooms["lobby"]
	if lobby == "" {
		t.Fatal("the room was not provisioned")
	}
	// The router invited the operator when it created the room.
	testkit.Until(t, 30*time.Second, func() (bool, string) {
		_, err := op.Client.JoinRoomByID(context.Background(), lobby)
		return err == nil, fmt.Sprintf("the operator cannot join the room: %v", err)
	})
	rec.waitFor(t, fmt.Sprintf("joined:%s:%s", lobby, op.UserID), 1, 60*time.Second)
	members, err := r.bot.router.JoinedMembers(context.Background(), lobby)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := members[e.userID("assistant")]; !ok {
		t.Errorf("the agent is not in the room: %v", members)
	}
}
