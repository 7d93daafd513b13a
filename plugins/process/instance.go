package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookroom/hookroom/internal/child"
	"github.com/hookroom/hookroom/plugins/process/jsonrpc"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// instance is one run of the plugin's process.
type instance struct {
	p    *Plugin
	proc *child.Process
	pid  int
	conn *jsonrpc.Conn

	exited <-chan struct{} // proc.Exited(): closed once the process was reaped and its stderr drained
	probe  chan struct{}   // asks the watchdog for a liveness probe

	timeouts atomic.Int32
}

// Exited is closed once the process ended.
func (inst *instance) Exited() <-chan struct{} { return inst.exited }

// ExitDescription says how the process ended (see exitDescription).
func (inst *instance) ExitDescription() string { return inst.exitDescription() }

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

// warnUnconfined logs, once per plugin, that its process starts without
// its sandbox (the kernel has no Landlock).
func (p *Plugin) warnUnconfined() {
	if p.sandboxWarned.CompareAndSwap(false, true) {
		p.log.Warn().Msg("This kernel has no Landlock: the plugin runs without its sandbox and can read every file hookroom's user can")
	}
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
	proc, err := child.Start(child.Spec{
		Argv: argv, Dir: p.spec.StateDir, Env: p.spec.Env, Sandbox: p.spec.Sandbox, Unconfined: p.warnUnconfined,
		Redact: p.redact, TailLines: tailLines, TailLineBytes: tailLineBytes, Stderr: p.stderrLine,
	})
	if err != nil {
		return fail("failed to run %s: %v", p.describeCommand(), err)
	}
	inst := &instance{p: p, proc: proc, pid: proc.PID(), exited: proc.Exited(), probe: make(chan struct{}, 1)}
	p.mu.Lock()
	p.spawned = append(p.spawned, inst.pid)
	p.mu.Unlock()
	inst.conn = jsonrpc.NewConn(proc.Stdout(), proc.Stdin(), hostHandler{p: p, inst: inst}, jsonrpc.Options{
		MaxLineBytes: p.sup.MaxLineBytes,
		Logger:       &p.log,
		Redact:       p.redact,
		Inline:       func(m string) bool { return m == protocol.MethodLog },
		Trace:        p.trace(),
	})
	p.wg.Add(1)
	go inst.closed()

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
	inst.proc.Kill("failed its start-up")
	<-inst.exited
	return nil, nil, fmt.Errorf("failed to start process plugin %q (%s): %w", p.spec.Name, p.describeCommand(), err)
}

// closed closes the connection once the process exited, failing the
// calls in flight with how it ended, and reports the stderr lines the rate
// limit dropped.
func (inst *instance) closed() {
	defer inst.p.wg.Done()
	<-inst.exited
	inst.conn.CloseWithError(fmt.Errorf("plugin process %s", inst.exitDescription()))
	_ = inst.conn.Close()
	if dropped := inst.p.stderrLimit.flush(); dropped > 0 {
		inst.p.log.Warn().Int("dropped", dropped).Msg("process plugin wrote too much to stderr; dropped lines")
	}
}

// exitDescription says how the process ended ("exited with exit status 2;
// last stderr: …"), or that it has not been reaped yet.
func (inst *instance) exitDescription() string {
	e := inst.proc.Exit()
	var b strings.Builder
	switch {
	case e.KillReason != "":
		b.WriteString("was killed by hookroom because it " + e.KillReason)
	case !e.Reaped:
		b.WriteString("closed its stdout")
	case e.Err == nil:
		b.WriteString("exited with status 0")
	default:
		b.WriteString("exited with " + e.Err.Error())
	}
	b.WriteString(tailText(e.Stderr))
	return b.String()
}

func (inst *instance) stderrTail() string { return tailText(inst.proc.Exit().Stderr) }

func tailText(tail []string) string {
	if len(tail) == 0 {
		return ""
	}
	return fmt.Sprintf("; last stderr: %q", strings.Join(tail, "\n"))
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
	inst.proc.Stop(sto, func(step child.Step) {
		switch step {
		case child.StepTerm:
			p.log.Warn().Dur("waited", sto).Msg("process plugin did not exit after shutdown; sending SIGTERM")
		case child.StepKill:
			p.log.Warn().Dur("waited", sto).Msg("process plugin did not exit after SIGTERM; killing it")
		}
	})
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
			inst.proc.Kill(reason)
		}
	}()
}

// timedOut records a call that passed its deadline.
func (inst *instance) timedOut() {
	n := inst.timeouts.Add(1)
	if int(n) >= inst.p.sup.MaxConsecutiveTimeouts {
		reason := fmt.Sprintf("let %d calls in a row pass their deadline", n)
		inst.p.log.Error().Int("pid", inst.pid).Msgf("process plugin %q %s; killing it", inst.p.spec.Name, reason)
		inst.proc.Kill(reason)
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
