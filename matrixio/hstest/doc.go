// Package hstest runs a real Matrix homeserver (the pinned Dendrite built by
// scripts/dendrite.sh) for end-to-end tests, so that such a test reads like an
// ordinary one:
//
//	func TestMain(m *testing.M) { hstest.Main(m) }
//
//	func TestHello(t *testing.T) {
//		srv := hstest.Shared(t)
//		alice := srv.RegisterUser(t, "alice")
//		bob := srv.RegisterUser(t, "bob")
//		// alice.Client and bob.Client are logged-in *mautrix.Client values.
//	}
//
// Main gives the test binary one server, started on first use; Start gives a
// test a server of its own (for restarts or rate-limit settings), and
// StartWith one with application service registration files loaded
// (AddAppService adds one to a running server, restarting it). Every server
// listens on 127.0.0.1 on a free port and keeps its data under /dev/shm. It is
// the test process's child: it is killed when the test (or the whole test
// binary) ends, even after a panic or a timeout, and its directory is removed.
//
// When the homeserver cannot be built or started the test fails with the last
// lines of its log; it never skips.
//
// RunNio runs a Python script with Debian's python3-matrix-nio, an
// independent Matrix client that nobody on this project wrote.
//
// StartClient starts an independent client with end-to-end encryption, as a
// person's app would be: Nio (python3-matrix-nio with python3-olm) or JS
// (matrix-js-sdk with its Rust crypto, as in Element). Both speak one line
// protocol, so a test can run the same steps with either:
//
//	a := srv.StartClient(t, hstest.Nio, alice, hstest.ClientOptions{})
//	room := a.CreateRoom(t, hstest.RoomOptions{Encrypted: true, Invite: []id.UserID{bot}})
//	a.WaitMember(t, room, bot)
//	asked := a.SendText(t, room, "hello bot")
//	reply := a.WaitMessage(t, room, hstest.Match{Sender: bot, After: asked})
//
// scripts/test-clients.sh installs both (./scripts/test.sh runs it).
//
// Dendrite is AGPL-3.0: it is only run as a separate program, never imported.
package hstest
