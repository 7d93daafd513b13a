package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// The operator's flow for accounts through an application service, on
// Dendrite: hookroom init --accounts appservice writes config.yaml, the
// tokens in hookroom.env and the registration file (hookroom appservice
// registration, run on that config, gives the same file), the homeserver
// loads the file (restarted with it), and hookroom run registers and logs
// in the router and the agent through the service (no password, no shared
// secret), provisions the encrypted room, and the agent answers the
// operator there.
func TestAppServiceRegistrationThenRun(t *testing.T) {
	hs := hstest.Start(t) // skips under -short
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff)
	localpart := func(name string) string { return name + "-" + suffix }
	op := hs.RegisterUser(t, "operator")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")

	// 1. hookroom init, against the running homeserver.
	code, stdout, stderr := runCLI("init", "--homeserver", hs.URL, "--server-name", hs.ServerName, "--accounts", "appservice",
		"--agent", localpart("assistant"), "--router", localpart("router"), "--room", localpart("lobby"),
		"--invite", string(op.UserID), "--listen", "127.0.0.1:0", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("hookroom init exited %d: %s%s", code, stdout, stderr)
	}
	regPath, envPath := filepath.Join(dir, "hookroom-registration.yaml"), filepath.Join(dir, "hookroom.env")
	env := readEnvFile(t, envPath)
	asToken := env["HOOKROOM_AS_TOKEN"]
	if len(asToken) != 64 || strings.Contains(stdout+stderr, asToken) {
		t.Fatalf("the as_token is not in the env file only:\n%s%s", stdout, stderr)
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	// The log as JSON lines, for the assertions below.
	text, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text = []byte(strings.Replace(string(text), "format: console", "format: json", 1))
	if err := os.WriteFile(cfgPath, text, 0o644); err != nil {
		t.Fatal(err)
	}

	// hookroom appservice registration on that config reuses its tokens:
	// the same file.
	regAgain := filepath.Join(dir, "again.yaml")
	if code, _, stderr := runCLI("appservice", "registration", "--config", cfgPath, "--out", regAgain); code != 0 {
		t.Fatalf("hookroom appservice registration exited %d: %s", code, stderr)
	}
	want, _ := os.ReadFile(regPath)
	if got, _ := os.ReadFile(regAgain); string(got) != string(want) || len(want) == 0 {
		t.Errorf("hookroom appservice registration wrote\n%s\nhookroom init wrote\n%s", got, want)
	}

	// 2. The homeserver loads it (restarted, as an operator would).
	hs.AddAppService(t, regPath)

	// 3. config.yaml reads the tokens from the env file; no shared secret.
	if code, _, stderr := runCLI("check", "--config", cfgPath); code != 0 {
		t.Fatalf("hookroom check exited %d: %s", code, stderr)
	}

	// 4. hookroom run, in-process, until the test ends.
	ctx, cancel := context.WithCancel(context.Background())
	var logs testkit.Buffer
	exited := make(chan struct{})
	runCode := -1
	go func() {
		defer close(exited)
		runCode = runContext(ctx, []string{"run", "--config", cfgPath}, &logs, &logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
			if runCode != 0 {
				t.Errorf("hookroom run exited %d", runCode)
			}
		case <-time.After(60 * time.Second):
			t.Error("hookroom run did not stop within 60s of its context ending")
		}
		if t.Failed() {
			t.Logf("hookroom run's log:\n%s", logs.String())
		}
		if strings.Contains(logs.String(), asToken) {
			t.Error("hookroom run logged the as_token")
		}
	})

	alias := id.NewRoomAlias(localpart("lobby"), hs.ServerName)
	var lobby id.RoomID
	testkit.Until(t, 90*time.Second, func() (bool, string) {
		select {
		case <-exited:
			t.Fatalf("hookroom run exited %d", runCode)
		default:
		}
		resp, err := op.Client.ResolveAlias(ctx, alias)
		if err != nil {
			return false, fmt.Sprintf("the room %s was not provisioned: %v", alias, err)
		}
		lobby = resp.RoomID
		_, err = op.Client.JoinRoomByID(ctx, lobby)
		return err == nil, fmt.Sprintf("the operator cannot join the room: %v", err)
	})
	agent := id.NewUserID(localpart("assistant"), hs.ServerName)
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		members, err := op.Client.JoinedMembers(ctx, lobby)
		if err != nil {
			return false, err.Error()
		}
		_, ok := members.Joined[agent]
		return ok, fmt.Sprintf("the agent is not in the room: %v", members.Joined)
	})

	// The agent was created through the application service; the router,
	// its sender, exists from the homeserver's start and only logged in.
	logLine := func(user, msg, also string) bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"message":"`+msg+`"`) && strings.Contains(line, also) && strings.Contains(line, `"user_id":"@`+user+`:`) {
				return true
			}
		}
		return false
	}
	if !logLine(localpart("assistant"), "Registered account", `"method":"appservice"`) {
		t.Errorf("no 'Registered account' line with method appservice for the agent")
	}
	for _, user := range []string{localpart("router"), localpart("assistant")} {
		if !logLine(user, "Logged in", `"device_id"`) || !logLine(user, "Published cross-signing keys", "") {
			t.Errorf("%s did not log in or publish cross-signing keys", user)
		}
	}

	replies := encryptedClient(t, ctx, op.Client, lobby, agent)
	if _, err := op.Client.SendText(ctx, lobby, "@"+localpart("assistant")+" hello through the appservice"); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(90 * time.Second)
	for {
		select {
		case body := <-replies:
			if strings.Contains(body, agents.EchoPrefix) && strings.Contains(body, "hello through the appservice") {
				return
			}
		case <-timeout:
			t.Fatalf("no answer from %s", agent)
		}
	}
}
