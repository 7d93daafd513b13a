package child

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookroom/hookroom/internal/procgroup"
	"github.com/hookroom/hookroom/sandbox"
)

// MaxStderrLine is where a stderr line is cut; the rest of the line is
// skipped.
const MaxStderrLine = 4 << 10

// stderrGrace is how long the exit waits for stderr to drain after the
// process was reaped: a grandchild may keep the pipe open.
const stderrGrace = 500 * time.Millisecond

// Spec is one child process to start.
type Spec struct {
	// Argv is the program (resolved: an absolute path) and its arguments.
	Argv []string
	// Dir is the working directory (it must exist). A confined process
	// gets TMPDIR=Dir/tmp (created), since /tmp is out of its reach,
	// unless Env sets TMPDIR.
	Dir string
	// Env is the complete environment, KEY=VALUE: nothing is inherited.
	Env []string
	// Sandbox, when set, confines the process.
	Sandbox *sandbox.Policy
	// Unconfined is called when Sandbox is set but the kernel has no
	// Landlock, before the process starts without its sandbox; it may log a
	// warning. Nil: nothing is said.
	Unconfined func()
	// Redact, when set, masks secrets in every stderr line before it is
	// kept or passed to Stderr.
	Redact func(string) string
	// TailLines is how many of the last stderr lines Exit reports;
	// TailLineBytes, when positive, cuts each of them there.
	TailLines     int
	TailLineBytes int
	// Stderr, when set, is called with the process id and every non-empty
	// stderr line, in order, from the goroutine reading them; truncated
	// says the line was cut at MaxStderrLine. It must not block for long:
	// the child's writes wait meanwhile.
	Stderr func(pid int, line string, truncated bool)
}

// Exit is what is known about how a process ended.
type Exit struct {
	// Reaped: the process ended and Err is its wait status.
	Reaped bool
	Err    error
	// KillReason is the reason given to the first Kill, "" without one.
	KillReason string
	// Stderr is the last TailLines lines of its stderr.
	Stderr []string
}

// Process is a started child process. Its methods are safe for concurrent
// use.
type Process struct {
	spec   Spec
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // our write end of its stdin
	stdout *os.File // our read end of its stdout
	stderr *os.File // our read end of its stderr

	exited     chan struct{}
	stderrDone chan struct{}

	mu   sync.Mutex
	exit Exit
}

// Start starts spec's program in a process group of its own, confined by
// spec.Sandbox, and starts the goroutines that read its stderr and wait for
// its exit; both end by the time Exited is closed. On error nothing of the
// attempt keeps running.
func Start(spec Spec) (*Process, error) {
	cmd := exec.Command(spec.Argv[0], spec.Argv[1:]...)
	cmd.Dir = spec.Dir
	cmd.Env = append([]string{}, spec.Env...) // never nil: nothing is inherited
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
		return nil, fmt.Errorf("failed to create pipes: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := start(cmd, spec); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its ends now.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()

	p := &Process{
		spec: spec, cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR,
		exited: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go p.readStderr()
	go p.wait()
	return p, nil
}

// start starts cmd, confined by spec.Sandbox when there is one.
func start(cmd *exec.Cmd, spec Spec) error {
	if spec.Sandbox == nil {
		return cmd.Start()
	}
	if sandbox.Available() == 0 {
		if spec.Unconfined != nil {
			spec.Unconfined()
		}
		return cmd.Start()
	}
	if spec.Dir != "" && !slices.ContainsFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "TMPDIR=") }) {
		tmp := filepath.Join(spec.Dir, "tmp")
		if err := os.MkdirAll(tmp, 0o700); err != nil {
			return fmt.Errorf("failed to create its temporary directory: %w", err)
		}
		cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	}
	return spec.Sandbox.Start(cmd)
}

// PID returns the process id.
func (p *Process) PID() int { return p.pid }

// Stdin returns the write end of the process's stdin; closing it tells
// the process to exit.
func (p *Process) Stdin() *os.File { return p.stdin }

// Stdout returns the read end of the process's stdout.
func (p *Process) Stdout() *os.File { return p.stdout }

// Exited is closed once the process was reaped, its stderr drained (or
// given up on) and what was left of its process group killed.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Exit reports how the process ended, as far as it is known yet.
func (p *Process) Exit() Exit {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.exit
	e.Stderr = slices.Clone(e.Stderr)
	return e
}

// wait reaps the process, lets its stderr drain and closes Exited.
func (p *Process) wait() {
	err := p.cmd.Wait()
	// Its last stderr lines often say why it exited; a grandchild may keep
	// the pipe open, so do not wait for them long.
	select {
	case <-p.stderrDone:
	case <-time.After(stderrGrace):
		_ = p.stderr.Close()
		<-p.stderrDone
	}
	// Leave nothing of its process group behind.
	_ = procgroup.Signal(p.pid, procgroup.Kill)
	p.mu.Lock()
	p.exit.Err = err
	p.exit.Reaped = true
	p.mu.Unlock()
	close(p.exited)
}

// readStderr reads the process's stderr line by line until EOF. Lines are
// cut at MaxStderrLine; it always reads on at full speed, so a flooding
// process never blocks on a full pipe.
func (p *Process) readStderr() {
	defer close(p.stderrDone)
	defer p.stderr.Close()
	br := bufio.NewReaderSize(p.stderr, MaxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		truncated := false
		if errors.Is(err, bufio.ErrBufferFull) {
			// Keep the first 4 KiB, skip the rest of the line.
			truncated = true
			line = append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > 0 {
			p.stderrLine(string(line), truncated)
		}
		if err != nil {
			return
		}
	}
}

func (p *Process) stderrLine(s string, truncated bool) {
	if p.spec.Redact != nil {
		s = p.spec.Redact(s)
	}
	if p.spec.TailLines > 0 {
		t := s
		if n := p.spec.TailLineBytes; n > 0 && len(t) > n {
			t = t[:n] + "…"
		} else if truncated {
			t += "…"
		}
		p.mu.Lock()
		if len(p.exit.Stderr) == p.spec.TailLines {
			copy(p.exit.Stderr, p.exit.Stderr[1:])
			p.exit.Stderr = p.exit.Stderr[:p.spec.TailLines-1]
		}
		p.exit.Stderr = append(p.exit.Stderr, t)
		p.mu.Unlock()
	}
	if p.spec.Stderr != nil {
		p.spec.Stderr(p.pid, s, truncated)
	}
}

// Signal sends sig to the process group, or to the process itself where
// there are no process groups. A reaped process is left alone (its pid may
// be another's now).
func (p *Process) Signal(sig os.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit.Reaped {
		return
	}
	if err := procgroup.Signal(p.pid, sig); err != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// Kill ends the process group at once. The first reason given is kept for
// Exit; it completes "was killed by hookroom because it …".
func (p *Process) Kill(reason string) {
	p.mu.Lock()
	if p.exit.Reaped {
		p.mu.Unlock()
		return
	}
	if p.exit.KillReason == "" {
		p.exit.KillReason = reason
	}
	p.mu.Unlock()
	if err := procgroup.Signal(p.pid, procgroup.Kill); err != nil {
		_ = p.cmd.Process.Kill()
	}
}

// WaitExit waits up to d for the process to exit and reports whether it
// did.
func (p *Process) WaitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

// Step is a step of Stop that is taken because the previous one did not
// end the process.
type Step uint8

// The steps Stop escalates to.
const (
	StepTerm Step = iota + 1 // SIGTERM
	StepKill                 // SIGKILL
)

// StopKillReason is the kill reason Stop's last step gives.
const StopKillReason = "did not stop when asked"

// Stop stops the process politely, then less so: its stdin closed, SIGTERM,
// SIGKILL, waiting up to timeout after each of the first two. escalate,
// when set, is called before SIGTERM and before SIGKILL (to log it). Stop
// returns once the process exited (Exited is closed).
func (p *Process) Stop(timeout time.Duration, escalate func(Step)) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.stdin.Close() // EOF on its stdin: time to exit
	if p.WaitExit(timeout) {
		return
	}
	if escalate != nil {
		escalate(StepTerm)
	}
	p.Signal(procgroup.Term)
	if p.WaitExit(timeout) {
		return
	}
	if escalate != nil {
		escalate(StepKill)
	}
	p.Kill(StopKillReason)
	<-p.exited
}
