package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookroom/hookroom/internal/procgroup"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
	"github.com/hookroom/hookroom/sandbox"
)

// instance is one run of the plugin's process.
type instance struct {
	p    *Plugin
	cmd  *exec.Cmd
	pid  int
	conn *jsonrpc.Conn

	stdin  *os.File // our write end of its stdin
	stdout *os.File // our read end of its stdout
	stderr *os.File // our read end of its stderr

	exited     chan struct{} // closed once the process was reaped and its pipes drained
	stderrDone chan struct{}
	probe      chan struct{} // asks the watchdog for a liveness probe

	mu         sync.Mutex
	exitErr    error
	hasExited  bool
	killReason string
	tail       []string // last stderr lines

	timeouts atomic.Int32
}

// argv resolves the command: a relative program path and "./"-arguments
// against the plugin directory, a bare program name in the server's PATH.
func (p *Plugin) argv() ([]string, error) {
	argv := make([]string, len(p.spec.Command))
	copy(argv, p.spec.Command)
	prog := argv[0]
	switch {
	case prog == "":
		return nil, errors.New("empty program name")
	case filepath.IsAbs(prog):
	case strings.ContainsRune(prog, '/'):
		if p.spec.Dir == "" {
			return nil, fmt.Errorf("relative program %q but no plugin directory", prog)
		}
		argv[0] = filepath.Join(p.spec.Dir, prog)
	default:
		lp, err := exec.LookPath(prog)
		if err != nil {
			return nil, fmt.Errorf("program %q not found: %w", prog, err)
		}
		argv[0] = lp
	}
	for i := 1; i < len(argv); i++ {
		if p.spec.Dir != "" && (strings.HasPrefix(argv[i], "./") || strings.HasPrefix(argv[i], "../")) {
			argv[i] = filepath.Join(p.spec.Dir, argv[i])
		}
	}
	return argv, nil
}

// start starts cmd, confined by the spec's sandbox when there is one.
// Confined, the process gets TMPDIR=<state dir>/tmp (created), since /tmp
// is out of its reach. Without Landlock it runs unconfined, and the first
// such start logs a warning.
func (p *Plugin) start(cmd *exec.Cmd) error {
	if p.spec.Sandbox == nil {
		return cmd.Start()
	}
	if sandbox.Available() == 0 {
		if p.sandboxWarned.CompareAndSwap(false, true) {
			p.log.Warn().Msg("This kernel has no Landlock: the plugin runs without its sandbox and can read every file hookroom's user can")
		}
		return cmd.Start()
	}
	if !slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }) {
		tmp := filepath.Join(p.spec.StateDir, "tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return fmt.Errorf("failed to create the plugin's temporary directory: %w", err)
		}
		cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	}
	return p.spec.Sandbox.Start(cmd)
}

// spawn starts a process and runs the initialize handshake. On error
// nothing of the attempt keeps running.
func (p *Plugin) spawn(ctx context.Context) (*instance, *protocol.InitializeResult, error) {
	fail := func(format string, args ...any) (*instance, *protocol.InitializeResult, error) {
		return nil, nil, fmt.Errorf("failed to start process plugin %q: %s", p.spec.Name, fmt.Sprintf(format, args...))
	}
	argv, err := p.argv()
	if err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = p.spec.StateDir
	cmd.Env = append([]string{}, p.spec.Env...) // never nil: nothing is inherited
	procgroup.Set(cmd)

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err1 := pipe()
	outR, outW, err2 := pipe()
	errR, errW, err3 := pipe()
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return fail("failed to create pipes: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := p.start(cmd); err != nil {
		closeAll()
		return fail("failed to run %s: %v", p.describeCommand(), err)
	}
	// The child has its ends now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	inst := &instance{
		p: p, cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), stderrDone: make(chan struct{}), probe: make(chan struct{}, 1),
	}
	p.mu.Lock()
	p.spawned = append(p.spawned, inst.pid)
	p.mu.Unlock()
	inst.conn = jsonrpc.NewConn(outR, inW, hostHandler{p: p, inst: inst}, jsonrpc.Options{
		MaxLineBytes: p.sup.MaxLineBytes,
		Logger:       &p.log,
		Inline:       func(m string) bool { return m == protocol.MethodLog },
		Trace:        p.trace(),
	})
	p.wg.Add(2)
	go inst.pumpStderr()
	go inst.wait()

	hctx, cancel := context.WithTimeout(ctx, p.sup.StartTimeout)
	defer cancel()
	params := protocol.InitializeParams{
		APIVersion: protocol.APIVersion, Plugin: p.spec.Name, Settings: p.spec.Settings.JSON(), StateDir: p.spec.StateDir,
	}
	raw, err := inst.conn.Call(hctx, protocol.MethodInitialize, params)
	var res protocol.InitializeResult
	if err == nil {
		if derr := json.Unmarshal(raw, &res); derr != nil {
			err = fmt.Errorf("failed to decode the initialize result: %w", derr)
		} else if res.APIVersion != protocol.APIVersion {
			err = fmt.Errorf("%w: the plugin speaks api_version %d, this host speaks %d", ErrAPIVersion, res.APIVersion, protocol.APIVersion)
		}
	}
	if err == nil {
		return inst, &res, nil
	}
	var re *jsonrpc.Error
	switch {
	case errors.Is(err, jsonrpc.ErrClosed):
		select {
		case <-inst.exited:
		case <-time.After(p.sup.StopTimeout):
		}
		err = fmt.Errorf("%w during start-up: it %s", ErrExited, inst.exitDescription())
	case errors.As(err, &re) && re.Code == protocol.CodeAPIVersion:
		err = fmt.Errorf("%w: %s", ErrAPIVersion, re.Message)
	case errors.As(err, &re):
		err = fmt.Errorf("initialize failed: %w", err)
	case hctx.Err() != nil:
		err = fmt.Errorf("no answer to initialize in time (%w)%s", err, inst.stderrTail())
	}
	p.kill(inst, "failed its start-up")
	<-inst.exited
	return nil, nil, fmt.Errorf("failed to start process plugin %q (%s): %w", p.spec.Name, p.describeCommand(), err)
}

// wait reaps the process, lets its stderr drain, closes the connection
// and reports the exit.
func (inst *instance) wait() {
	defer inst.p.wg.Done()
	err := inst.cmd.Wait()
	// Its last stderr lines often say why it exited; a grandchild may keep
	// the pipe open, so do not wait for them long.
	select {
	case <-inst.stderrDone:
	case <-time.After(500 * time.Millisecond):
		_ = inst.stderr.Close()
		<-inst.stderrDone
	}
	// Leave nothing of its process group behind.
	_ = procgroup.Signal(inst.pid, procgroup.Kill)
	inst.mu.Lock()
	inst.exitErr = err
	inst.hasExited = true
	inst.mu.Unlock()
	inst.conn.CloseWithError(fmt.Errorf("plugin process %s", inst.exitDescription()))
	_ = inst.conn.Close()
	close(inst.exited)
	inst.p.onExit(inst)
}

// exitDescription says how the process ended ("exited with exit status 2;
// last stderr: …"), or that it has not been reaped yet.
func (inst *instance) exitDescription() string {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	var b strings.Builder
	switch {
	case inst.killReason != "":
		b.WriteString("was killed by hookroom because it " + inst.killReason)
	case !inst.hasExited:
		b.WriteString("closed its stdout")
	case inst.exitErr == nil:
		b.WriteString("exited with status 0")
	default:
		b.WriteString("exited with " + inst.exitErr.Error())
	}
	b.WriteString(tailText(inst.tail))
	return b.String()
}

func (inst *instance) stderrTail() string {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return tailText(inst.tail)
}

func tailText(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return fmt.Sprintf("; last stderr: %q", strings.Join(tail, "\n"))
}

// kill ends the process group at once; reason completes "was killed by
// hookroom because it …".
func (p *Plugin) kill(inst *instance, reason string) {
	inst.mu.Lock()
	if inst.hasExited {
		inst.mu.Unlock()
		return
	}
	if inst.killReason == "" {
		inst.killReason = reason
	}
	inst.mu.Unlock()
	if err := procgroup.Signal(inst.pid, procgroup.Kill); err != nil {
		_ = inst.cmd.Process.Kill()
	}
}

func (inst *instance) signal(sig os.Signal) {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	if inst.hasExited {
		return
	}
	if err := procgroup.Signal(inst.pid, sig); err != nil {
		_ = inst.cmd.Process.Signal(sig)
	}
}

func (inst *instance) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-inst.exited:
		return true
	case <-t.C:
		return false
	}
}

// stopInstance stops a process politely, then less so: shutdown, stdin
// closed, SIGTERM, SIGKILL. It returns once the process was reaped.
func (p *Plugin) stopInstance(inst *instance) {
	sto := p.sup.StopTimeout
	select {
	case <-inst.exited:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), sto)
	_, err := inst.conn.Call(ctx, protocol.MethodShutdown, nil)
	cancel()
	if err != nil {
		p.log.Debug().Err(err).Msg("process plugin did not answer shutdown")
	}
	_ = inst.stdin.Close() // EOF on its stdin: time to exit
	if inst.waitExit(sto) {
		return
	}
	p.log.Warn().Dur("waited", sto).Msg("process plugin did not exit after shutdown; sending SIGTERM")
	inst.signal(procgroup.Term)
	if inst.waitExit(sto) {
		return
	}
	p.log.Warn().Dur("waited", sto).Msg("process plugin did not exit after SIGTERM; killing it")
	p.kill(inst, "did not stop when asked")
	<-inst.exited
}

// watch probes the instance's liveness: periodically, and at once after a
// call timed out. An unanswered probe kills the process (which then counts
// as a crash and is restarted).
func (p *Plugin) watch(inst *instance) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(p.sup.PingInterval)
		defer t.Stop()
		for {
			select {
			case <-inst.exited:
				return
			case <-t.C:
			case <-inst.probe:
			}
			ctx, cancel := context.WithTimeout(context.Background(), p.sup.PingTimeout)
			_, err := inst.conn.Call(ctx, protocol.MethodPing, nil)
			cancel()
			var re *jsonrpc.Error
			if err == nil || errors.As(err, &re) || errors.Is(err, jsonrpc.ErrClosed) {
				continue // any answer proves it reads and writes
			}
			reason := fmt.Sprintf("stopped answering (no answer to %s within %v)", protocol.MethodPing, p.sup.PingTimeout)
			p.log.Error().Int("pid", inst.pid).Msgf("process plugin %q %s; killing it", p.spec.Name, reason)
			p.kill(inst, reason)
		}
	}()
}

// timedOut records a call that passed its deadline.
func (inst *instance) timedOut() {
	n := inst.timeouts.Add(1)
	if int(n) >= inst.p.sup.MaxConsecutiveTimeouts {
		reason := fmt.Sprintf("let %d calls in a row pass their deadline", n)
		inst.p.log.Error().Int("pid", inst.pid).Msgf("process plugin %q %s; killing it", inst.p.spec.Name, reason)
		inst.p.kill(inst, reason)
		return
	}
	select {
	case inst.probe <- struct{}{}:
	default:
	}
}

// answered records a call the process answered.
func (inst *instance) answered() { inst.timeouts.Store(0) }

// trace returns the jsonrpc trace function writing to Spec.Trace.
func (p *Plugin) trace() func(out bool, line []byte) {
	w := p.spec.Trace
	if w == nil {
		return nil
	}
	var mu sync.Mutex
	return func(out bool, line []byte) {
		prefix := "<-- "
		if out {
			prefix = "--> "
		}
		line = bytes.TrimRight(line, "\r\n")
		mu.Lock()
		defer mu.Unlock()
		_, _ = io.WriteString(w, prefix)
		_, _ = w.Write(line)
		_, _ = io.WriteString(w, "\n")
	}
}
