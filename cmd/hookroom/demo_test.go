package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/tracking"
)

// TestDemo runs the README's first command, scripts/demo.sh, on a fresh
// demo directory and talks to the agent it starts as the person it
// creates: accept the invite to the lobby, mention the assistant, get the
// echo model's answer.
func TestDemo(t *testing.T) {
	skipDemoShort(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port := freePort(t)
	cmd := exec.Command(filepath.Join(root, "scripts", "demo.sh"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "HOOKROOM_DEMO_DIR="+dir, "HOOKROOM_DEMO_PORT="+strconv.Itoa(port),
		"OPENAI_API_KEY=", "HOOKROOM_OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var log strings.Builder
	running := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			mu.Lock()
			log.WriteString(sc.Text() + "\n")
			mu.Unlock()
			// The demo says so once the router and the assistant finished
			// their first sync: messages sent from now on are new to them.
			if strings.Contains(sc.Text(), "demo: hookroom is ready") {
				once.Do(func() { close(running) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("demo output:\n%s", log.String())
			mu.Unlock()
		}
	}()
	select {
	case <-running:
	case <-time.After(5 * time.Minute):
		t.Fatal("the demo did not start hookroom")
	}

	output := func() string {
		mu.Lock()
		defer mu.Unlock()
		return log.String()
	}
	// The registration secret is never printed, but the printed commands
	// that check the demo config and list its hooks work as they are.
	env, err := os.ReadFile(filepath.Join(dir, "homeserver", "env"))
	if err != nil {
		t.Fatal(err)
	}
	secret := ""
	for _, l := range strings.Split(string(env), "\n") {
		if v, ok := strings.CutPrefix(l, "SECRET="); ok {
			secret = strings.Trim(v, `'"`)
		}
	}
	if secret == "" {
		t.Fatalf("no SECRET in the homeserver's env file")
	}
	for _, sub := range []string{"check", "hooks"} {
		out := runPrinted(t, output(), sub)
		if strings.Contains(out, secret) {
			t.Errorf("hookroom %s printed the registration secret", sub)
		}
		if want := map[string]string{"check": "is valid", "hooks": "EVENT"}[sub]; !strings.Contains(out, want) {
			t.Errorf("the printed hookroom %s command printed %q, want %q", sub, out, want)
		}
	}

	password, err := os.ReadFile(filepath.Join(dir, "person.password"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cli, err := mautrix.NewClient("http://127.0.0.1:"+strconv.Itoa(port), "", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Login(ctx, &mautrix.ReqLogin{
		Type: mautrix.AuthTypePassword, Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: "demo"},
		Password: strings.TrimSpace(string(password)), StoreCredentials: true,
	}); err != nil {
		t.Fatalf("login as the demo person: %v", err)
	}
	lobby, err := cli.ResolveAlias(ctx, "#lobby:localhost")
	if err != nil {
		t.Fatalf("resolve the lobby: %v", err)
	}
	if _, err := cli.JoinRoomByID(ctx, lobby.RoomID); err != nil {
		t.Fatalf("join the lobby (the demo should have invited the person): %v", err)
	}
	// The demo's lobby is end-to-end encrypted, as Element makes private
	// rooms: the person's client encrypts and decrypts (mautrix's crypto).
	db, err := tracking.OpenSQLite(ctx, filepath.Join(t.TempDir(), "person-crypto.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	syncer := mautrix.NewDefaultSyncer()
	cli.Syncer = syncer
	helper, err := cryptohelper.NewCryptoHelper(cli, []byte("demo test pickle key"), db)
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Init(ctx); err != nil {
		t.Fatalf("set up the person's encryption: %v", err)
	}
	cli.Crypto = helper
	replies := make(chan *event.Event, 16)
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) {
		if ev.Sender == id.UserID("@assistant:localhost") {
			replies <- ev
		}
	})
	go func() { _ = cli.SyncWithContext(ctx) }()
	// As in encryptedClient: the local state store is polled, not checked after each sync.
	testkit.Until(t, time.Minute, func() (bool, string) {
		encrypted, err := cli.StateStore.IsEncrypted(ctx, lobby.RoomID)
		return encrypted, fmt.Sprintf("the person's client does not see the lobby as encrypted (%v)", err)
	})
	sent, err := cli.SendText(ctx, lobby.RoomID, "@assistant hello from the demo test")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := cli.GetEvent(ctx, lobby.RoomID, sent.EventID)
	if err == nil && raw.Type != event.EventEncrypted {
		t.Errorf("the person's message went out as %s, want m.room.encrypted", raw.Type)
	}
	for {
		select {
		case ev := <-replies:
			if !ev.Mautrix.WasEncrypted {
				t.Errorf("the assistant answered in the clear in an encrypted room: %s", ev.ID)
			}
			body := ev.Content.AsMessage().Body
			if nc := ev.Content.AsMessage().NewContent; nc != nil {
				body = nc.Body
			}
			if strings.Contains(body, "echo model") && strings.Contains(body, "hello from the demo test") {
				out := output()
				if strings.Contains(out, secret) {
					t.Error("the demo printed the registration secret")
				}
				if strings.Contains(out, "\x1b[") {
					t.Error("the demo's output to a pipe has ANSI colour codes")
				}
				// A normal exchange logs no warning and no error.
				for _, l := range strings.Split(out, "\n") {
					if strings.Contains(l, " WRN ") || strings.Contains(l, " ERR ") {
						t.Errorf("warning or error during a normal exchange: %s", l)
					}
				}
				return
			}
		case <-ctx.Done():
			t.Fatal("no answer from the assistant")
		}
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// runPrinted runs, in bash, the commands the demo printed for hookroom sub
// (check or hooks): the line that exports the homeserver's URL and secret
// from its env file, then the hookroom line.
func runPrinted(t *testing.T, output, sub string) string {
	t.Helper()
	var export, command string
	for _, l := range strings.Split(output, "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "│"))
		switch {
		case strings.HasPrefix(l, ". ") && strings.Contains(l, "export HOOKROOM_DEMO_SHARED_SECRET="):
			export = l
		case strings.Contains(l, "hookroom' "+sub+" --config "):
			command = l
		}
	}
	if export == "" || command == "" {
		t.Fatalf("the demo printed no commands for hookroom %s:\n%s", sub, output)
	}
	cmd := exec.Command("bash", "-c", export+" && "+command)
	cmd.Env = append(os.Environ(), "HOOKROOM_DEMO_SHARED_SECRET=", "HOOKROOM_DEMO_HOMESERVER=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s && %s: %v\n%s", export, command, err, out)
	}
	return string(out)
}

// TestDemoKeepsConfigEdits runs the demo twice on one directory with an
// edit to its config.yaml in between: the second run keeps the edit (and
// comes up with it).
func TestDemoKeepsConfigEdits(t *testing.T) {
	skipDemoShort(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	port := strconv.Itoa(freePort(t))
	smoke := func() string {
		cmd := exec.Command(filepath.Join(root, "scripts", "demo.sh"), "--smoke")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "HOOKROOM_DEMO_DIR="+dir, "HOOKROOM_DEMO_PORT="+port,
			"OPENAI_API_KEY=", "HOOKROOM_OPENAI_BASE_URL=", "ANTHROPIC_API_KEY=")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "smoke test: hookroom is ready") {
			t.Fatalf("demo.sh --smoke: %v\n%s", err, out)
		}
		return string(out)
	}
	smoke()
	path := filepath.Join(dir, "config.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const role = "role: A friendly general helper."
	if !strings.Contains(string(data), role) {
		t.Fatalf("the demo config has no %q:\n%s", role, data)
	}
	edited := "# my notes\n" + strings.Replace(string(data), role, "role: An operator's own helper.", 1)
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	out := smoke()
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != edited {
		t.Errorf("the second run changed the edited config:\n%s", after)
	}
	if !strings.Contains(out, "kept as you left it") {
		t.Errorf("the second run does not say it kept the config:\n%s", out)
	}
}

// skipDemoShort skips a test of scripts/demo.sh under go test -short: the
// demo builds and starts Dendrite, which the unit tier does not need.
func skipDemoShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test of scripts/demo.sh (Dendrite): not run with -short")
	}
}
