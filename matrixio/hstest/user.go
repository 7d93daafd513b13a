package hstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"
)

// User is a registered, logged-in account on a test homeserver.
type User struct {
	UserID      id.UserID
	Password    string
	AccessToken string
	DeviceID    id.DeviceID
	// Client is logged in as the user, with its own HTTP connection pool (closed when the test
	// ends), so several users in one test behave like separate clients.
	Client *mautrix.Client
}

var (
	// runSuffix makes names unique per test binary run; userSeq within it.
	runSuffix = randomHex(3)
	userSeq   atomic.Int64
)

// RegisterUser creates an account through shared-secret registration and logs it in with its
// password (a fresh device). The localpart gets a unique suffix ("alice" becomes e.g.
// "alice-3fa9c1-7"), so tests can share a server and reuse names. The test fails when either
// step fails.
func (s *Server) RegisterUser(t testing.TB, localpart string) *User {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	name := fmt.Sprintf("%s-%s-%d", strings.ToLower(localpart), runSuffix, userSeq.Add(1))
	password := "pw-" + randomHex(12)

	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	cli, err := mautrix.NewClient(s.URL, "", "")
	if err != nil {
		t.Fatalf("hstest: failed to create a client for %s: %v", s.URL, err)
	}
	cli.Client = &http.Client{Transport: transport, Timeout: 2 * time.Minute}

	admin := synapseadmin.Client{Client: cli}
	if _, err := admin.SharedSecretRegister(ctx, s.Secret, synapseadmin.ReqSharedSecretRegister{
		Username: name,
		Password: password,
	}); err != nil {
		t.Fatalf("hstest: failed to register %q: %v", name, err)
	}
	resp, err := cli.Login(ctx, &mautrix.ReqLogin{
		Type:                     mautrix.AuthTypePassword,
		Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: name},
		Password:                 password,
		InitialDeviceDisplayName: "hstest",
		StoreCredentials:         true,
	})
	if err != nil {
		t.Fatalf("hstest: failed to log in as %q: %v", name, err)
	}
	return &User{
		UserID:      resp.UserID,
		Password:    password,
		AccessToken: resp.AccessToken,
		DeviceID:    resp.DeviceID,
		Client:      cli,
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
