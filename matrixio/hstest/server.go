package hstest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/testkit"
)

const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 10 * time.Second
	logTailLines = 25
	// keepEnv names the environment variable that, set to 1, keeps data directories after the
	// tests (their paths are printed) for a look at the logs and databases.
	keepEnv = "HOOKROOM_HSTEST_KEEP"
)

// Server is one running Dendrite homeserver. Its exported fields do not change while it runs,
// and stay the same across Restart.
type Server struct {
	URL        string // client-server API base, http://127.0.0.1:PORT
	ServerName string // "localhost": user ids look like @name:localhost
	Secret     string // registration shared secret for /_synapse/admin/v1/register; never log it
	Dir        string // data directory: dendrite.yaml, SQLite files, dendrite.out, log/dendrite.log

	port int
	bin  string
	// appServices are the registration files (in Dir) written into
	// dendrite.yaml at every launch.
	appServices []string

	mu   sync.Mutex
	proc *process // nil while stopped
}

// process is one run of the dendrite binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been reaped
	err    error         // cmd.Wait's result; read only after exited is closed
}

// Start starts a fresh homeserver for the calling test only, with its own data directory (under
// /dev/shm when it exists) and a free port. It is stopped and its directory removed in
// t.Cleanup; when the test failed, the end of the server's log is logged first. Use it when a
// test restarts or stops the server; other tests should share one with Shared.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t, Options{})
}

// Options configure a server started with StartWith. The zero value is
// Start's server.
type Options struct {
	// AppServices are application service registration files (YAML, as
	// Synapse and Dendrite read them) the server loads at start
	// (app_service_api.config_files). They are copied into the data
	// directory first, so they may be removed afterwards.
	AppServices []string
}

// StartWith is Start with opts: a fresh homeserver for the calling test
// only, stopped and removed in t.Cleanup.
func StartWith(t testing.TB, opts Options) *Server {
	t.Helper()
	skipShort(t)
	s, err := newServer(opts)
	if err != nil {
		t.Fatalf("hstest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("hstest: %v", err)
		}
		if t.Failed() {
			t.Logf("hstest: end of the homeserver log (%s):\n%s", s.Dir, s.logTail())
		}
		s.removeDir()
	})
	return s
}

// StartIn starts a homeserver for the calling test on the data directory dir, creating it when
// it does not exist, on the port of its last run when that is free (else on a free port): users, rooms and history a previous run left in dir are
// kept. It is stopped in t.Cleanup but dir is never removed, so that a slow setup (a benchmark
// that creates a thousand rooms) can be reused by the next run.
func StartIn(t testing.TB, dir string) *Server {
	t.Helper()
	skipShort(t)
	bin, err := binaries()
	if err != nil {
		t.Fatalf("hstest: %v", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatalf("hstest: failed to create the data directory: %v", err)
	}
	s := &Server{Dir: dir, bin: bin}
	// The port of the last run first: the URL stays the same, as it would
	// for a homeserver that is restarted in production.
	last := 0
	if env, err := readEnvFile(filepath.Join(dir, "env")); err == nil {
		_, p, _ := strings.Cut(strings.TrimPrefix(env["URL"], "http://"), ":")
		last, _ = strconv.Atoi(p)
	}
	for attempt := 1; ; attempt++ {
		if attempt == 1 && last > 0 {
			s.port = last
		} else if s.port, err = freePort(); err != nil {
			t.Fatalf("hstest: %v", err)
		}
		if err = s.launch(); err == nil {
			break
		}
		if !errors.Is(err, errPortInUse) || attempt == 3 {
			t.Fatalf("hstest: %v", err)
		}
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("hstest: %v", err)
		}
	})
	return s
}

// newServer creates a data directory and starts a server in it on a free port. On failure the
// directory is removed and the error carries the end of the server's log.
func newServer(opts Options) (*Server, error) {
	bin, err := binaries()
	if err != nil {
		return nil, err
	}
	base := dataRoot()
	sweepOnce.Do(func() { sweepStale(base) })
	dir, err := os.MkdirTemp(base, fmt.Sprintf("hstest-%d-", os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("failed to create a data directory: %w", err)
	}
	s := &Server{Dir: dir, bin: bin}
	for _, file := range opts.AppServices {
		if err := s.copyAppService(file); err != nil {
			s.removeDir()
			return nil, err
		}
	}
	// A free port can be taken between choosing and binding it; then choose again.
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			err = s.launch()
		}
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == 3 {
			s.removeDir()
			return nil, err
		}
	}
}

// Stop stops the server: SIGTERM, then SIGKILL after 10 s. It reports an error when the server
// had already exited on its own (a crash, with the end of its log) or had to be killed. Stopping a
// stopped server does nothing. Do not stop the server returned by Shared.
func (s *Server) Stop() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return nil
	}
	defer os.Remove(filepath.Join(s.Dir, "dendrite.pid"))
	select {
	case <-p.exited:
		return fmt.Errorf("dendrite in %s exited on its own (%v); end of its log:\n%s", s.Dir, p.err, s.logTail())
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if sig := killedBy(p.err); sig != 0 && sig != syscall.SIGTERM {
			// It died before our signal reached it (a crash noticed late).
			return fmt.Errorf("dendrite in %s exited on its own (%v); end of its log:\n%s", s.Dir, p.err, s.logTail())
		}
		return nil
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("dendrite in %s did not stop within %s of SIGTERM and was killed", s.Dir, stopTimeout)
	}
}

// killedBy returns the signal that ended a process, given cmd.Wait's
// error, or 0 if it was not ended by a signal.
func killedBy(err error) syscall.Signal {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return 0
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// Restart stops the server and starts it again on the same directory and port: users, access
// tokens, rooms and history are kept, and clients keep working with the same URL. The test fails
// when either step fails. Do not restart the server returned by Shared.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatalf("hstest: restart: %v", err)
	}
	if err := s.launch(); err != nil {
		t.Fatalf("hstest: restart: %v", err)
	}
}

// AddAppService registers the application service of the registration file with the server,
// as an operator does: the file is copied into the data directory, listed in dendrite.yaml's
// app_service_api.config_files, and the server is restarted (same directory, port and users).
// The test fails when the file cannot be read or the server does not start with it. Do not call
// it on the server returned by Shared.
func (s *Server) AddAppService(t testing.TB, file string) {
	t.Helper()
	if err := s.copyAppService(file); err != nil {
		t.Fatalf("hstest: %v", err)
	}
	s.Restart(t)
}

// copyAppService copies a registration file into the data directory and adds it to the files
// the next launch lists in dendrite.yaml.
func (s *Server) copyAppService(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("failed to read the application service registration: %w", err)
	}
	dst := filepath.Join(s.Dir, fmt.Sprintf("appservice-%d.yaml", len(s.appServices)+1))
	if err := os.WriteFile(dst, data, 0o600); err != nil {
		return fmt.Errorf("failed to copy the application service registration: %w", err)
	}
	s.appServices = append(s.appServices, dst)
	return nil
}

// configureAppServices lists s.appServices in dendrite.yaml's app_service_api.config_files,
// which scripts/dendrite.sh prepare writes as an empty list.
func (s *Server) configureAppServices() error {
	if len(s.appServices) == 0 {
		return nil
	}
	path := filepath.Join(s.Dir, "dendrite.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read dendrite.yaml: %w", err)
	}
	const section, empty = "\napp_service_api:\n", "\n  config_files: []\n"
	start := bytes.Index(data, []byte(section))
	end := -1
	if start >= 0 {
		// The section ends at the next top-level key.
		rest := data[start+len(section):]
		next := len(rest)
		for i := 0; i < len(rest)-1; i++ {
			if rest[i] == '\n' && rest[i+1] != ' ' && rest[i+1] != '#' {
				next = i
				break
			}
		}
		if i := bytes.Index(rest[:next+1], []byte(empty[1:])); i >= 0 {
			end = start + len(section) + i
		}
	}
	if end < 0 {
		return errors.New("dendrite.yaml from scripts/dendrite.sh prepare has no app_service_api.config_files: [] to fill in")
	}
	var list strings.Builder
	list.WriteString("  config_files:\n")
	for _, f := range s.appServices {
		fmt.Fprintf(&list, "  - %s\n", strconv.Quote(f))
	}
	out := slices.Concat(data[:end], []byte(list.String()), data[end+len(empty)-1:])
	return os.WriteFile(path, out, 0o600)
}

var errPortInUse = errors.New("port already in use")

// launch writes the configuration for s.port with scripts/dendrite.sh and starts the dendrite
// binary as a child of this process, then waits until the server answers on its own socket.
func (s *Server) launch() error {
	if msg, err := runScript(s.bin, "prepare", s.Dir, strconv.Itoa(s.port)); err != nil {
		return fmt.Errorf("failed to configure Dendrite with scripts/dendrite.sh prepare: %w\n%s", err, msg)
	}
	if err := s.configureAppServices(); err != nil {
		return err
	}
	env, err := readEnvFile(filepath.Join(s.Dir, "env"))
	if err != nil {
		return err
	}
	s.URL, s.Secret, s.ServerName = env["URL"], env["SECRET"], env["SERVER_NAME"]
	if s.URL == "" || s.Secret == "" || s.ServerName == "" {
		return fmt.Errorf("incomplete %s/env from scripts/dendrite.sh prepare", s.Dir)
	}

	outPath := filepath.Join(s.Dir, "dendrite.out")
	out, err := os.OpenFile(outPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", outPath, err)
	}
	outStart, _ := out.Seek(0, io.SeekEnd)
	cmd := exec.Command(filepath.Join(s.bin, "dendrite"),
		"--config", filepath.Join(s.Dir, "dendrite.yaml"),
		"--http-bind-address", "127.0.0.1:"+strconv.Itoa(s.port),
		"--https-bind-address", "127.0.0.1:0",
		"--really-enable-open-registration")
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out
	p, err := startChild(cmd, func() { out.Close() })
	if err != nil {
		return fmt.Errorf("failed to run %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	_ = os.WriteFile(filepath.Join(s.Dir, "dendrite.pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600)

	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-p.exited:
			if logContains(outPath, outStart, "address already in use") {
				return fmt.Errorf("127.0.0.1:%d: %w", s.port, errPortInUse)
			}
			return fmt.Errorf("dendrite in %s exited during start-up (%v); end of its log:\n%s", s.Dir, p.err, s.logTail())
		default:
		}
		// The socket must be this process's: another server on the port would answer too.
		if listens(pid, s.port) && answers(hc, s.URL) {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("dendrite in %s did not answer on %s within %s; end of its log:\n%s", s.Dir, s.URL, readyTimeout, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startChild starts cmd as a child that dies with this test binary and reaps it in the
// background: p.exited closes once it has exited; then onExit runs, if given (it also runs when
// the start fails). Pdeathsig: the
// kernel kills the child when its parent thread dies, so a test binary that panics, times out or
// is killed never leaves a server or client behind.
func startChild(cmd *exec.Cmd, onExit func()) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig follows the OS thread that forked the child, not the process, so this
		// goroutine holds on to that thread until the child has exited.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if onExit != nil {
			defer onExit()
		}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func answers(hc *http.Client, baseURL string) bool {
	resp, err := hc.Get(baseURL + "/_matrix/client/versions")
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// listens reports whether process pid holds the socket listening on 127.0.0.1:port.
func listens(pid, port int) bool {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return true // no procfs: rely on the HTTP check alone
	}
	local := fmt.Sprintf("0100007F:%04X", port)
	inode := ""
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" {
			inode = f[9]
			break
		}
	}
	if inode == "" {
		return false
	}
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join(fdDir, e.Name())); err == nil && target == want {
			return true
		}
	}
	return false
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("failed to find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// logTail returns the last lines of the server's stdout/stderr and of its own log file.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, name := range []string{"dendrite.out", filepath.Join("log", "dendrite.log")} {
		lines := lastLines(filepath.Join(s.Dir, name), logTailLines)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s ---\n", name)
		for _, l := range lines {
			if len(l) > 400 {
				l = l[:400] + "…"
			}
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	if b.Len() == 0 {
		return "(no log output)\n"
	}
	return b.String()
}

func lastLines(path string, n int) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > 256<<10 {
		_, _ = f.Seek(-256<<10, io.SeekEnd)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return lines
}

func logContains(path string, from int64, substr string) bool {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < from {
		return false
	}
	return bytes.Contains(data[from:], []byte(substr))
}

func readEnvFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read the server's env file: %w", err)
	}
	env := make(map[string]string)
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

func (s *Server) removeDir() {
	if os.Getenv(keepEnv) == "1" {
		fmt.Fprintf(os.Stderr, "hstest: keeping %s (%s=1)\n", s.Dir, keepEnv)
		return
	}
	_ = os.RemoveAll(s.Dir)
}

// dataRoot is where data directories go: tmpfs when there is one (SQLite's fsyncs on a disk
// make the server 1.5-3x slower).
func dataRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && syscall.Access("/dev/shm", 2 /* W_OK */) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

var sweepOnce sync.Once

// sweepStale removes data directories left by test binaries that no longer run (killed before
// their cleanup ran; their servers died with them).
func sweepStale(base string) {
	dirs, _ := filepath.Glob(filepath.Join(base, "hstest-*-*"))
	for _, dir := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), "hstest-"), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// binaries returns the directory holding the Dendrite binaries: $HOOKROOM_DENDRITE_BIN, or the
// cache directory scripts/dendrite.sh uses. When they are missing it builds them (minutes).
var binaries = sync.OnceValues(func() (string, error) {
	dir := os.Getenv("HOOKROOM_DENDRITE_BIN")
	if dir == "" {
		out, err := runScript("", "bin")
		if err != nil {
			return "", fmt.Errorf("failed to ask scripts/dendrite.sh for its binaries: %w\n%s", err, out)
		}
		dir = strings.TrimSpace(out)
	}
	if haveBinaries(dir) {
		return dir, nil
	}
	fmt.Fprintf(os.Stderr, "hstest: Dendrite binaries missing in %s; running scripts/dendrite.sh build\n", dir)
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	var tail bytes.Buffer
	cmd := exec.Command("bash", script, "build")
	cmd.Env = append(os.Environ(), "HOOKROOM_DENDRITE_BIN="+dir)
	cmd.Stdout = os.Stderr
	cmd.Stderr = io.MultiWriter(os.Stderr, &tail)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to build Dendrite with scripts/dendrite.sh build: %w\n%s", err, tail.String())
	}
	if !haveBinaries(dir) {
		return "", fmt.Errorf("scripts/dendrite.sh build left binaries missing in %s", dir)
	}
	return dir, nil
})

func haveBinaries(dir string) bool {
	for _, name := range []string{"dendrite", "generate-config", "generate-keys", "create-account"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// runScript runs scripts/dendrite.sh with args and returns its stdout, or its stderr on failure.
// A non-empty bin is passed on as HOOKROOM_DENDRITE_BIN.
func runScript(bin string, args ...string) (string, error) {
	script, err := scriptPath()
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = os.Environ()
	if bin != "" {
		cmd.Env = append(cmd.Env, "HOOKROOM_DENDRITE_BIN="+bin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stderr.String(), err
	}
	return stdout.String(), nil
}

// scriptPath finds scripts/dendrite.sh in the repository (from the working directory: a test
// runs in its package directory).
var scriptPath = sync.OnceValues(func() (string, error) { return testkit.RepoFile("scripts/dendrite.sh") })
