package hstest

import (
	"bufio"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// ClientKind selects the independent end-to-end encrypted client behind a Client.
type ClientKind string

const (
	// Nio is Debian's python3-matrix-nio with python3-olm (libolm), run by /usr/bin/python3
	// from e2ee_client.py.
	Nio ClientKind = "nio"
	// JS is matrix-js-sdk with its Rust crypto (the wasm build of matrix-sdk-crypto, the stack
	// Element uses), run by node from jsclient/client.mjs.
	JS ClientKind = "js"
)

const (
	// DefaultCommandTimeout bounds a command that has no timeout of its own.
	DefaultCommandTimeout = 30 * time.Second
	// DefaultWaitTimeout is how long WaitMessage and SyncUntil wait when not told.
	DefaultWaitTimeout = 30 * time.Second
	// startTimeout bounds a client's start-up (node loads the crypto wasm; python imports nio).
	startTimeout = 60 * time.Second
	// traceEnv names the environment variable that, set to 1, logs every command's name and
	// duration (never its arguments).
	traceEnv     = "HOOKROOM_HSTEST_TRACE"
	stderrKeep   = 64 << 10
	closeTimeout = 10 * time.Second
)

//go:embed e2ee_client.py
var e2eeClientSource []byte

// Client is an independent Matrix client with end-to-end encryption, logged in as one user on
// one device, running as a child process of the test. It is what a real person's app would be
// in an end-to-end test: it syncs in the background, keeps its crypto up to date, trusts every
// device of other users on first use (Trust changes that) and decrypts what it receives.
//
//	alice := srv.RegisterUser(t, "alice")
//	bob := srv.RegisterUser(t, "bob")
//	a := srv.StartClient(t, hstest.Nio, alice, hstest.ClientOptions{})
//	b := srv.StartClient(t, hstest.JS, bob, hstest.ClientOptions{})
//	room := a.CreateRoom(t, hstest.RoomOptions{Encrypted: true, Invite: []id.UserID{bob.UserID}})
//	b.Join(t, room)
//	a.WaitMember(t, room, bob.UserID)
//	sent := a.SendText(t, room, "hello")
//	got := b.WaitMessage(t, room, hstest.Match{EventID: sent})
//	// got.Body == "hello", got.Encrypted == true
//
// Every method fails the test (t.Fatalf, with the client's error) when the command fails or
// times out, so call them from the test's goroutine. The client's stderr is logged when the test
// fails, and the process is stopped in t.Cleanup. Commands travel over the client's stdin and
// stdout as one JSON object per line (see e2ee_client.py); passwords go there, never on a
// command line or into a log.
type Client struct {
	Kind     ClientKind
	UserID   id.UserID
	DeviceID id.DeviceID
	// Ed25519 and Curve25519 are the device's identity keys (unpadded base64).
	Ed25519, Curve25519 string
	// Restored is true when the device came from StoreDir rather than a new password login.
	Restored bool
	// StoreDir is where the client keeps its device (keys, sessions, sync token, access token).
	StoreDir string

	proc   *process
	stdin  io.WriteCloser
	resps  chan clientResponse
	stderr *tailBuffer
	trace  bool

	mu     sync.Mutex // one command at a time
	nextID int64
	closed bool
}

// ClientOptions tune StartClient. The zero value is a fresh device in a new temporary store.
type ClientOptions struct {
	// StoreDir keeps the device between runs. Empty: a new directory under t.TempDir(). To
	// restart a device, Close the client and start another with the same StoreDir: it logs in
	// again as the same device with the same keys. The js client keeps its crypto store in
	// memory and writes it to StoreDir on Close (a killed js client loses it).
	StoreDir string
	// DeviceName is the device's display name for a new login (default "hstest-nio" or
	// "hstest-js").
	DeviceName string
	// DeviceID asks a new login for this device id (the server picks one when empty). With a
	// StoreDir that already holds a device, it must be that device's id.
	DeviceID id.DeviceID
}

// RoomOptions describe a room for CreateRoom.
type RoomOptions struct {
	Name      string
	Encrypted bool // m.room.encryption with m.megolm.v1.aes-sha2 in the initial state
	Direct    bool // is_direct, trusted_private_chat preset
	Invite    []id.UserID
}

// Outgoing is a message for Send.
type Outgoing struct {
	Body       string
	HTML       string     // formatted_body (org.matrix.custom.html), optional
	MsgType    string     // default m.text
	ThreadRoot id.EventID // send into this thread (m.thread)
	ReplyTo    id.EventID // m.in_reply_to (inside the thread when ThreadRoot is set)
}

// Match selects the message WaitMessage waits for: the oldest message in the room that this
// client received and that passes every set field.
type Match struct {
	Sender     id.UserID
	Contains   string     // substring of the final text (after edits)
	EventID    id.EventID // exactly this event
	ThreadRoot id.EventID // in this thread
	After      id.EventID // received after this event (which must reach the client too)
	Edited     bool       // edited at least once
	Redacted   bool       // redacted since
	// IncludeHistory also considers messages sent before this device first logged in (a new
	// device cannot decrypt those); they are skipped otherwise.
	IncludeHistory bool
	// AllowUndecryptable returns a message that stayed undecryptable instead of failing the
	// test. A matching undecryptable message is never skipped silently: when it is the oldest
	// candidate and no decrypted match arrives within a few seconds, it is the result.
	AllowUndecryptable bool
	Timeout            time.Duration // default DefaultWaitTimeout
}

// Message is a received m.room.message as the client decrypted and folded it.
type Message struct {
	RoomID        id.RoomID  `json:"room_id"`
	EventID       id.EventID `json:"event_id"`
	Sender        id.UserID  `json:"sender"`
	Timestamp     int64      `json:"origin_server_ts"`
	MsgType       string     `json:"msgtype"`
	Body          string     `json:"body"`       // the text as first sent
	FinalBody     string     `json:"final_body"` // the text after the sender's last m.replace
	FormattedBody string     `json:"formatted_body"`
	Encrypted     bool       `json:"encrypted"`     // it came as m.room.encrypted
	Undecryptable bool       `json:"undecryptable"` // ... and could not be decrypted
	DecryptError  string     `json:"decrypt_error"`
	ThreadRoot    id.EventID `json:"thread_root"`
	ReplyTo       id.EventID `json:"reply_to"`
	Edits         int        `json:"edits"`
	LastEditID    id.EventID `json:"last_edit_id"`
	// UndecryptableEdits counts edits of this message that could not be decrypted (yet).
	UndecryptableEdits int    `json:"undecryptable_edits"`
	Redacted           bool   `json:"redacted"`
	History            bool   `json:"history"` // sent before this device first logged in
	MediaURL           string `json:"media_url"`
	MediaEncrypted     bool   `json:"media_encrypted"`
}

// Reaction is a received m.reaction: an m.annotation of another event with a key (an emoji).
type Reaction struct {
	RoomID  id.RoomID  `json:"room_id"`
	EventID id.EventID `json:"event_id"`
	Sender  id.UserID  `json:"sender"`
	Target  id.EventID `json:"target"` // the event reacted to
	Key     string     `json:"key"`
	// Encrypted is true when it came as m.room.encrypted. Both clients send reactions in the
	// clear, also in encrypted rooms, as Element does.
	Encrypted bool `json:"encrypted"`
}

// ReactionMatch selects the reaction WaitReaction waits for: the oldest reaction in the room
// that this client received and that passes every set field.
type ReactionMatch struct {
	Sender  id.UserID
	Target  id.EventID
	Key     string
	Timeout time.Duration // default DefaultWaitTimeout
}

// SyncCondition is what SyncUntil waits for.
type SyncCondition string

const (
	UntilSynced       SyncCondition = "synced"        // one more complete sync
	UntilInvited      SyncCondition = "invited"       // invited to the room (any room when empty)
	UntilJoined       SyncCondition = "joined"        // the client has joined the room
	UntilEncrypted    SyncCondition = "encrypted"     // the room has encryption enabled
	UntilMemberJoined SyncCondition = "member_joined" // the user has joined the room
)

// TrustPolicy is how a client treats the devices of other users.
type TrustPolicy string

const (
	// TrustOnFirstUse marks every device of every other user as verified when first seen (the
	// default).
	TrustOnFirstUse TrustPolicy = "tofu"
	// TrustNone leaves devices unverified; messages are still encrypted for them.
	TrustNone TrustPolicy = "none"
)

type clientResponse struct {
	ID     int64           `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// StartClient starts an independent client of the given kind and logs it in as u with u's
// password: a new device, or the device kept in opts.StoreDir. It returns after the first sync.
// The process is stopped when the test ends; Close stops it earlier (for a restart).
func (s *Server) StartClient(t testing.TB, kind ClientKind, u *User, opts ClientOptions) *Client {
	t.Helper()
	c, err := s.startClient(t, kind, u, opts)
	if err != nil {
		t.Fatalf("hstest: %v", err)
	}
	return c
}

// ClientSpec is one client for StartClients: what StartClient takes.
type ClientSpec struct {
	Kind    ClientKind
	User    *User
	Options ClientOptions
}

// StartClients starts one client per spec, all at the same time (loading node's crypto wasm
// or python's nio and the first sync take seconds each), each as StartClient does, and returns
// them in the order of specs. It fails the test when any of them fails to start.
func (s *Server) StartClients(t testing.TB, specs ...ClientSpec) []*Client {
	t.Helper()
	clients := make([]*Client, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { clients[i], errs[i] = s.startClient(t, spec.Kind, spec.User, spec.Options) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("hstest: %v", err)
	}
	return clients
}

// startClient is StartClient reporting its failure instead of failing the test, so that it may
// run on any goroutine (it uses only t's goroutine-safe methods: TempDir, Cleanup, Logf).
func (s *Server) startClient(t testing.TB, kind ClientKind, u *User, opts ClientOptions) (*Client, error) {
	c, err := launchClient(t, kind)
	if err != nil {
		return nil, fmt.Errorf("failed to start the %s client for %s: %w", kind, u.UserID, err)
	}
	if opts.StoreDir == "" {
		opts.StoreDir = t.TempDir()
	}
	c.StoreDir, c.UserID = opts.StoreDir, u.UserID
	var res struct {
		UserID     id.UserID   `json:"user_id"`
		DeviceID   id.DeviceID `json:"device_id"`
		Restored   bool        `json:"restored"`
		Ed25519    string      `json:"ed25519"`
		Curve25519 string      `json:"curve25519"`
	}
	start := time.Now()
	if err := c.do("login", startTimeout, map[string]any{
		"url":         s.URL,
		"user_id":     u.UserID,
		"password":    u.Password,
		"store_dir":   opts.StoreDir,
		"device_name": opts.DeviceName,
		"device_id":   opts.DeviceID,
	}, &res); err != nil {
		return nil, fmt.Errorf("%s client %s: login: %w", kind, u.UserID, err)
	}
	if c.trace {
		t.Logf("hstest: %s client %s: login took %v", kind, u.UserID, time.Since(start).Round(time.Millisecond))
	}
	c.UserID, c.DeviceID, c.Restored = res.UserID, res.DeviceID, res.Restored
	c.Ed25519, c.Curve25519 = res.Ed25519, res.Curve25519
	if c.UserID != u.UserID || c.DeviceID == "" || (opts.DeviceID != "" && c.DeviceID != opts.DeviceID) {
		return nil, fmt.Errorf("%s client logged in as %s/%q, want %s/%q", kind, c.UserID, c.DeviceID, u.UserID, opts.DeviceID)
	}
	return c, nil
}

// launchClient starts the client program and waits for its ready line. The process is stopped
// and, when the test failed, its stderr logged in t.Cleanup.
func launchClient(t testing.TB, kind ClientKind) (*Client, error) {
	var cmd *exec.Cmd
	switch kind {
	case Nio:
		dir := t.TempDir()
		script := filepath.Join(dir, "e2ee_client.py")
		if err := os.WriteFile(script, e2eeClientSource, 0o600); err != nil {
			return nil, err
		}
		cmd = exec.Command(NioPython, script)
		cmd.Env = append(os.Environ(), "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	case JS:
		dir, err := jsClientDir()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command("node", filepath.Join(dir, "client.mjs"))
		cmd.Env = os.Environ()
	default:
		return nil, fmt.Errorf("unknown client kind %q (want %q or %q)", kind, Nio, JS)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	// stdout goes through an io.Pipe (not cmd.StdoutPipe) so that cmd.Wait, which reaps the
	// process in the background, waits for the reader instead of closing the pipe under it.
	outR, outW := io.Pipe()
	c := &Client{
		Kind:   kind,
		stdin:  stdin,
		resps:  make(chan clientResponse, 16),
		stderr: &tailBuffer{max: stderrKeep},
		trace:  os.Getenv(traceEnv) == "1",
	}
	cmd.Stdout, cmd.Stderr = outW, c.stderr
	c.proc, err = startChild(cmd, func() { outW.Close() })
	if err != nil {
		return nil, fmt.Errorf("failed to run %s: %w", cmd.Path, err)
	}
	go c.readResponses(outR)
	t.Cleanup(func() {
		start := time.Now()
		killed := c.stop()
		if c.trace || killed {
			t.Logf("hstest: %s client %s stopped in %v (killed: %v)", c.Kind, c.UserID, time.Since(start).Round(time.Millisecond), killed)
		}
		if t.Failed() {
			t.Logf("hstest: stderr of the %s client %s/%s:\n%s", c.Kind, c.UserID, c.DeviceID, c.stderr.String())
		}
	})
	start := time.Now()
	var ready struct {
		Ready bool `json:"ready"`
	}
	if err := c.await(0, startTimeout, &ready); err != nil {
		c.stop()
		return nil, err
	}
	if c.trace {
		t.Logf("hstest: %s client started in %v", kind, time.Since(start).Round(time.Millisecond))
	}
	return c, nil
}

// readResponses parses the client's stdout; a line that is not a response goes to the stderr
// buffer so that it shows up in the failure log.
func (c *Client) readResponses(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for sc.Scan() {
		var resp clientResponse
		if err := json.Unmarshal(sc.Bytes(), &resp); err != nil {
			fmt.Fprintf(c.stderr, "[stray stdout] %s\n", sc.Text())
			continue
		}
		c.resps <- resp
	}
	close(c.resps)
}

// call runs one command and decodes its result into result (when non-nil); it fails the test
// on any error.
func (c *Client) call(t testing.TB, cmd string, timeout time.Duration, args map[string]any, result any) {
	t.Helper()
	start := time.Now()
	if err := c.do(cmd, timeout, args, result); err != nil {
		t.Fatalf("hstest: %s client %s/%s: %s: %v", c.Kind, c.UserID, c.DeviceID, cmd, err)
	}
	if c.trace {
		t.Logf("hstest: %s client %s: %s took %v", c.Kind, c.UserID, cmd, time.Since(start).Round(time.Millisecond))
	}
}

func (c *Client) do(cmd string, timeout time.Duration, args map[string]any, result any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("the client is closed")
	}
	c.nextID++
	req := map[string]any{"id": c.nextID, "cmd": cmd}
	for k, v := range args {
		req[k] = v
	}
	line, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := c.stdin.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("failed to send the command: %w%s", err, c.exitNote())
	}
	return c.await(c.nextID, timeout, result)
}

// await waits for the response with the given id (0 is the ready line), skipping late answers
// to earlier commands that timed out.
func (c *Client) await(want int64, timeout time.Duration, result any) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		select {
		case resp, ok := <-c.resps:
			if !ok {
				<-c.proc.exited
				return fmt.Errorf("the client exited%s", c.exitNote())
			}
			if resp.ID != want {
				continue
			}
			if !resp.OK {
				return errors.New(resp.Error)
			}
			if result != nil && len(resp.Result) > 0 {
				if err := json.Unmarshal(resp.Result, result); err != nil {
					return fmt.Errorf("bad result %s: %w", resp.Result, err)
				}
			}
			return nil
		case <-timer.C:
			return fmt.Errorf("no answer within %v (see the client's stderr below)", timeout)
		}
	}
}

// exitNote describes how the process ended, with the end of its stderr, once it has exited.
func (c *Client) exitNote() string {
	select {
	case <-c.proc.exited:
		hint := ""
		out := c.stderr.String()
		switch {
		case strings.Contains(out, "No module named 'nio'"), strings.Contains(out, "No module named 'olm'"):
			hint = "\n(python3-matrix-nio or python3-olm is missing: ./scripts/test.sh installs them)"
		case strings.Contains(out, "ERR_MODULE_NOT_FOUND"):
			hint = "\n(the js client's packages are missing: ./scripts/test-clients.sh install-js)"
		}
		return fmt.Sprintf(" (%v)%s\nstderr:\n%s", c.proc.err, hint, lastN(out, 40))
	default:
		return ""
	}
}

// Close asks the client to stop (the js client then writes its store) and waits for it. The
// user's device stays registered on the server; start a client with the same StoreDir to use it
// again. Calling Close twice does nothing.
func (c *Client) Close(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return
	}
	c.call(t, "close", closeTimeout, nil, nil)
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	select {
	case <-c.proc.exited:
	case <-time.After(closeTimeout):
		t.Fatalf("hstest: %s client %s did not exit within %v of close", c.Kind, c.UserID, closeTimeout)
	}
}

// stop ends the process: EOF on stdin (a graceful close), then SIGKILL after closeTimeout. It
// reports whether the process had to be killed.
func (c *Client) stop() bool {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	_ = c.stdin.Close()
	select {
	case <-c.proc.exited:
		return false
	case <-time.After(closeTimeout):
		_ = c.proc.cmd.Process.Kill()
		<-c.proc.exited
		return true
	}
}

// CreateRoom creates a room (encrypted when opts.Encrypted) and waits until the client's sync
// has it, so that Send can follow at once.
func (c *Client) CreateRoom(t testing.TB, opts RoomOptions) id.RoomID {
	t.Helper()
	var res struct {
		RoomID id.RoomID `json:"room_id"`
	}
	invite := opts.Invite
	if invite == nil {
		invite = []id.UserID{}
	}
	c.call(t, "create_room", DefaultCommandTimeout+5*time.Second, map[string]any{
		"name": opts.Name, "encrypted": opts.Encrypted, "is_direct": opts.Direct, "invite": invite,
	}, &res)
	return res.RoomID
}

// Invite invites user to room.
func (c *Client) Invite(t testing.TB, room id.RoomID, user id.UserID) {
	t.Helper()
	c.call(t, "invite", DefaultCommandTimeout, map[string]any{"room_id": room, "user_id": user}, nil)
}

// Join joins room (accepting an invite) and waits until the client's sync has it.
func (c *Client) Join(t testing.TB, room id.RoomID) {
	t.Helper()
	c.call(t, "join", DefaultCommandTimeout+5*time.Second, map[string]any{"room_id": room}, nil)
}

// SyncUntil waits until the condition holds in the client's synced state and returns the room
// (for UntilInvited with an empty room: the first room the client is invited to). user is only used
// by UntilMemberJoined.
func (c *Client) SyncUntil(t testing.TB, room id.RoomID, cond SyncCondition, user id.UserID, timeout time.Duration) id.RoomID {
	t.Helper()
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	var res struct {
		RoomID id.RoomID `json:"room_id"`
	}
	c.call(t, "sync_until", timeout+15*time.Second, map[string]any{
		"room_id": room, "condition": cond, "user_id": user, "timeout_ms": timeout.Milliseconds(),
	}, &res)
	return res.RoomID
}

// WaitMember waits until user has joined room as this client sees it. Send after it: a message
// sent before the sender's client knows of a member is not encrypted for that member's devices.
func (c *Client) WaitMember(t testing.TB, room id.RoomID, user id.UserID) {
	t.Helper()
	c.SyncUntil(t, room, UntilMemberJoined, user, 0)
}

// WaitDevice waits until the client knows the device of user (a device-list query has
// returned it), so that what it sends next is encrypted for that device too: a sender that has
// not yet seen a new device does not share the room key with it.
func (c *Client) WaitDevice(t testing.TB, user id.UserID, device id.DeviceID) {
	t.Helper()
	c.call(t, "wait_device", DefaultWaitTimeout+15*time.Second, map[string]any{
		"user_id": user, "device_id": device, "timeout_ms": DefaultWaitTimeout.Milliseconds(),
	}, nil)
}

// SendText sends a plain m.text message and returns its event id.
func (c *Client) SendText(t testing.TB, room id.RoomID, body string) id.EventID {
	t.Helper()
	return c.Send(t, room, Outgoing{Body: body})
}

// Send sends a message (encrypted when the room is) and returns its event id.
func (c *Client) Send(t testing.TB, room id.RoomID, msg Outgoing) id.EventID {
	t.Helper()
	var res struct {
		EventID id.EventID `json:"event_id"`
	}
	c.call(t, "send", DefaultCommandTimeout, map[string]any{
		"room_id": room, "body": msg.Body, "html": msg.HTML, "msgtype": msg.MsgType,
		"thread_root": msg.ThreadRoot, "reply_to": msg.ReplyTo,
	}, &res)
	return res.EventID
}

// Edit replaces the text of the client's own message target (m.replace with m.new_content) and
// returns the edit's event id.
func (c *Client) Edit(t testing.TB, room id.RoomID, target id.EventID, body string) id.EventID {
	t.Helper()
	var res struct {
		EventID id.EventID `json:"event_id"`
	}
	c.call(t, "edit", DefaultCommandTimeout, map[string]any{"room_id": room, "event_id": target, "body": body}, &res)
	return res.EventID
}

// Redact redacts target and returns the redaction's event id.
func (c *Client) Redact(t testing.TB, room id.RoomID, target id.EventID, reason string) id.EventID {
	t.Helper()
	var res struct {
		EventID id.EventID `json:"event_id"`
	}
	c.call(t, "redact", DefaultCommandTimeout, map[string]any{"room_id": room, "event_id": target, "reason": reason}, &res)
	return res.EventID
}

// React annotates target with key (an m.reaction with m.relates_to {rel_type: m.annotation,
// event_id, key}) and returns the reaction's event id. Like Element, both clients send it
// unencrypted even in an encrypted room (what nio's room_send and matrix-js-sdk's sendEvent do
// by default for m.reaction).
func (c *Client) React(t testing.TB, room id.RoomID, target id.EventID, key string) id.EventID {
	t.Helper()
	var res struct {
		EventID id.EventID `json:"event_id"`
	}
	c.call(t, "react", DefaultCommandTimeout, map[string]any{"room_id": room, "event_id": target, "key": key}, &res)
	return res.EventID
}

// WaitReaction waits for the oldest reaction in room that passes m (see ReactionMatch) and
// returns it. The test fails on a timeout.
func (c *Client) WaitReaction(t testing.TB, room id.RoomID, m ReactionMatch) Reaction {
	t.Helper()
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	var r Reaction
	c.call(t, "wait_reaction", timeout+15*time.Second, map[string]any{
		"room_id": room, "sender": m.Sender, "target": m.Target, "key": m.Key, "timeout_ms": timeout.Milliseconds(),
	}, &r)
	return r
}

// SendImage uploads data (encrypted as an attachment when the room is encrypted) and sends it
// as m.image; it returns the event id and the mxc:// URI of the upload.
func (c *Client) SendImage(t testing.TB, room id.RoomID, name, mimetype string, data []byte) (id.EventID, id.ContentURIString) {
	t.Helper()
	var res struct {
		EventID    id.EventID          `json:"event_id"`
		ContentURI id.ContentURIString `json:"content_uri"`
	}
	c.call(t, "send_image", DefaultCommandTimeout, map[string]any{
		"room_id": room, "name": name, "mimetype": mimetype, "data": base64.StdEncoding.EncodeToString(data),
	}, &res)
	return res.EventID, res.ContentURI
}

// FileMessage is a file message for SendFile.
type FileMessage struct {
	MsgType  string // "m.file" when empty
	Body     string // what clients show: the file's name, or "Voice message"
	FileName string // the content's filename field (and the upload's name); none when empty
	MimeType string // "application/octet-stream" when empty
	Data     []byte
	// Info holds more fields of the content's info (duration, w, h); mimetype and size are set
	// from MimeType and Data.
	Info map[string]any
	// Content holds more fields of the content, set last (they replace what SendFile made).
	Content map[string]any
	// Voice, when set, makes it a voice message as Element sends one: info.duration, MSC1767's
	// org.matrix.msc1767.text, .file and .audio (duration and waveform) and MSC3245's
	// org.matrix.msc3245.voice flag.
	Voice               *VoiceNote
	ThreadRoot, ReplyTo id.EventID
}

// VoiceNote is the recording's part of a voice message (FileMessage.Voice).
type VoiceNote struct {
	DurationMS int
	Waveform   []int // Element's thumbnail waveform, values 0..1024
}

// SendFile uploads m.Data (an encrypted attachment, as nio's upload with encrypt=True makes it,
// when the room is encrypted) and sends it as m describes; it returns the event id and the
// mxc:// URI of the upload. Only the Nio client has it (the JS client answers an unknown
// command).
func (c *Client) SendFile(t testing.TB, room id.RoomID, m FileMessage) (id.EventID, id.ContentURIString) {
	t.Helper()
	var res struct {
		EventID    id.EventID          `json:"event_id"`
		ContentURI id.ContentURIString `json:"content_uri"`
	}
	args := map[string]any{
		"room_id": room, "msgtype": m.MsgType, "name": m.Body, "filename": m.FileName, "mimetype": m.MimeType,
		"data": base64.StdEncoding.EncodeToString(m.Data), "info": m.Info, "content": m.Content,
		"thread_root": m.ThreadRoot, "reply_to": m.ReplyTo,
	}
	if m.Voice != nil {
		args["voice"] = map[string]any{"duration_ms": m.Voice.DurationMS, "waveform": m.Voice.Waveform}
	}
	c.call(t, "send_file", DefaultCommandTimeout, args, &res)
	return res.EventID, res.ContentURI
}

// SendVoice sends an Ogg/Opus recording as a voice message the way Element's microphone button
// does (m.audio named "Voice message", audio/ogg, its duration, a waveform, the MSC3245 voice
// flag; an encrypted attachment in an encrypted room) and returns its event id. Nio only.
func (c *Client) SendVoice(t testing.TB, room id.RoomID, ogg []byte, durationMS int) id.EventID {
	t.Helper()
	ev, _ := c.SendFile(t, room, FileMessage{
		MsgType: "m.audio", Body: "Voice message", MimeType: "audio/ogg", Data: ogg,
		Voice: &VoiceNote{DurationMS: durationMS, Waveform: voiceWaveform},
	})
	return ev
}

// voiceWaveform is a thumbnail waveform like the one Element sends with a voice message.
var voiceWaveform = []int{0, 92, 310, 640, 880, 1024, 760, 512, 260, 128, 300, 700, 940, 610, 220, 40}

// Download fetches the media of a message the client received (m.image, m.file, ...) and
// returns its content, decrypted when it is an encrypted attachment, and its mimetype.
func (c *Client) Download(t testing.TB, room id.RoomID, eventID id.EventID) ([]byte, string) {
	t.Helper()
	var res struct {
		Data     string `json:"data"`
		MimeType string `json:"mimetype"`
	}
	c.call(t, "download", DefaultCommandTimeout, map[string]any{"room_id": room, "event_id": eventID}, &res)
	data, err := base64.StdEncoding.DecodeString(res.Data)
	if err != nil {
		t.Fatalf("hstest: %s client %s: download %s: bad base64: %v", c.Kind, c.UserID, eventID, err)
	}
	return data, res.MimeType
}

// Trust sets how the client treats other users' devices (TrustOnFirstUse by default).
func (c *Client) Trust(t testing.TB, policy TrustPolicy) {
	t.Helper()
	c.call(t, "trust", DefaultCommandTimeout, map[string]any{"policy": policy}, nil)
}

// WaitMessage waits for the oldest message in room that passes m (see Match) and returns it
// decrypted, with edits folded in. The test fails on a timeout (the error lists the last
// messages the client saw in the room) and, unless m.AllowUndecryptable, when the message could
// not be decrypted.
func (c *Client) WaitMessage(t testing.TB, room id.RoomID, m Match) Message {
	t.Helper()
	timeout := m.Timeout
	if timeout <= 0 {
		timeout = DefaultWaitTimeout
	}
	var msg Message
	c.call(t, "wait_message", timeout+15*time.Second, map[string]any{
		"room_id": room, "sender": m.Sender, "contains": m.Contains, "event_id": m.EventID,
		"thread_root": m.ThreadRoot, "after": m.After, "edited": m.Edited, "redacted": m.Redacted,
		"include_history": m.IncludeHistory, "timeout_ms": timeout.Milliseconds(),
	}, &msg)
	if msg.Undecryptable && !m.AllowUndecryptable {
		t.Fatalf("hstest: %s client %s/%s: message %s from %s in %s is undecryptable: %s",
			c.Kind, c.UserID, c.DeviceID, msg.EventID, msg.Sender, room, msg.DecryptError)
	}
	return msg
}

// tailBuffer keeps the last max bytes written to it; it is safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
		b.cut = true
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf) == 0 {
		return "(nothing)\n"
	}
	if b.cut {
		return "…" + string(b.buf)
	}
	return string(b.buf)
}

func lastN(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// jsClientDir is matrixio/hstest/jsclient in the repository, with its packages installed by
// scripts/test-clients.sh install-js (run here when they are missing or stale).
var jsClientDir = sync.OnceValues(func() (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	root := filepath.Dir(filepath.Dir(script))
	dir := filepath.Join(root, "matrixio", "hstest", "jsclient")
	installer := filepath.Join(root, "scripts", "test-clients.sh")
	var out strings.Builder
	cmd := exec.Command("bash", installer, "install-js")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to install the js client's packages with %s install-js: %w\n%s", installer, err, out.String())
	}
	return dir, nil
})
