package bot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
)

// NewLogger returns the server's logger as config.yaml's log section asks
// for, writing to w (os.Stderr when nil).
//
// The console format is coloured only when w is a terminal and NO_COLOR is
// not set: a log redirected to a file, a pipe or journald is plain text.
// Durations are written with their unit ("took=2.1ms" in the console
// format, "took":"2.1ms" in JSON) wherever hookroom logs one; see
// logDuration.
//
// Each line is also written, as JSON, to every writer in tee (the
// console's LogBuffer).
func NewLogger(cfg config.Log, w io.Writer, tee ...io.Writer) (zerolog.Logger, error) {
	if w == nil {
		w = os.Stderr
	}
	level, err := zerolog.ParseLevel(cfg.Level)
	if err != nil || cfg.Level == "" {
		if cfg.Level != "" {
			return zerolog.Logger{}, fmt.Errorf("failed to parse log level %q: %w", cfg.Level, err)
		}
		level = zerolog.InfoLevel
	}
	// Every goroutine logs: lines reach w one at a time (w need not be
	// safe for concurrent writes, as a bytes.Buffer is not).
	var out io.Writer = zerolog.SyncWriter(w)
	if cfg.Format == "console" {
		out = zerolog.ConsoleWriter{Out: out, TimeFormat: time.TimeOnly, NoColor: !colourful(w)}
	}
	if len(tee) > 0 {
		ws := []io.Writer{out}
		for _, t := range tee {
			ws = append(ws, zerolog.SyncWriter(t))
		}
		out = zerolog.MultiLevelWriter(ws...)
	}
	out = routineWarnings{w: out, level: level}
	return zerolog.New(out).Level(level).With().Timestamp().Logger(), nil
}

// colourful reports whether console output to w may use ANSI colours: w is
// a terminal and the NO_COLOR convention (no-color.org) is not in force.
func colourful(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	f, ok := w.(interface{ Fd() uintptr })
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// logDuration is a duration as a log field value: with its unit, rounded to
// what a person reads (2.137ms, 1.5s).
func logDuration(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Microsecond).String()
	}
}

// routineWarnings writes the warnings the Matrix libraries log for what is
// normal operation for hookroom at a lower level (and drops them when the
// log's level is above that):
//
//   - "Request canceled" (debug): the client library logs every request
//     whose context was cancelled as a warning, but hookroom cancels
//     requests only on purpose: a typing notice it no longer needs, a turn
//     someone stopped, the long-poll sync and whatever is in flight when
//     hookroom stops. Whatever a cancellation means for a turn is logged by
//     hookroom itself. Requests that time out or fail are not touched.
//   - "Didn't find olm session to encrypt group session" (info): the crypto
//     library logs it whenever an account first shares its room key with a
//     device it has no olm session with yet — before it claims a one-time
//     key and makes one. That is routine (a person's new device; an agent
//     answering before its sync brought the person's own olm message). If
//     no session can be made at all, the device is sent a "withheld"
//     notice, may still request the key, and the person's client reports
//     the message it cannot decrypt.
//   - "Self-signing key of user not found" (info, logged as an error): see
//     the routine table.
type routineWarnings struct {
	w     io.Writer
	level zerolog.Level // the log's level
}

// routine are the library lines routineWarnings rewrites: logged at from,
// recognised by the end of their JSON line, and written at level instead.
var routine = []struct {
	from   []byte // the line's start: {"level":"warn" or {"level":"error"
	suffix []byte
	level  zerolog.Level
}{
	{warnPrefix, []byte(`"message":"Request canceled"}`), zerolog.DebugLevel},
	{warnPrefix, []byte(`"message":"Didn't find olm session to encrypt group session"}`), zerolog.InfoLevel},
	// mautrix resolves the trust of a person's device as soon as one of
	// their messages is decrypted; when their self-signing key has not
	// been fetched yet (their first encrypted message in a new room) it
	// logs an error and leaves the trust unset until the keys arrive.
	{errorPrefix, []byte(`"message":"Self-signing key of user not found"}`), zerolog.InfoLevel},
}

var (
	warnPrefix  = []byte(`{"level":"warn"`)
	errorPrefix = []byte(`{"level":"error"`)
)

func (q routineWarnings) Write(p []byte) (int, error) {
	if !bytes.HasPrefix(p, warnPrefix) && !bytes.HasPrefix(p, errorPrefix) {
		return q.w.Write(p)
	}
	line := bytes.TrimRight(p, "\n")
	for _, r := range routine {
		if !bytes.HasPrefix(p, r.from) || !bytes.HasSuffix(line, r.suffix) {
			continue
		}
		if r.level < q.level {
			return len(p), nil
		}
		out := append([]byte(`{"level":"`+r.level.String()+`"`), p[len(r.from):]...)
		if _, err := q.w.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return q.w.Write(p)
}

// splitErrors returns one error per configuration problem in err: when err
// holds a config.ErrorList of several problems, each is returned wrapped in
// what err says around the list ("failed to reload: config.yaml:12: …");
// otherwise err alone.
func splitErrors(err error) []error {
	var list config.ErrorList
	if !errors.As(err, &list) || len(list) < 2 {
		return []error{err}
	}
	head := strings.TrimSuffix(strings.TrimSuffix(err.Error(), list.Error()), ": ")
	out := make([]error, len(list))
	for i, e := range list {
		if head == "" || head == err.Error() {
			out[i] = e
		} else {
			out[i] = fmt.Errorf("%s: %w", head, e)
		}
	}
	return out
}

// logErrors logs err at level with msg, one line per configuration
// problem it holds (see splitErrors), each naming its file:line. Lines of
// one error carry problem=N/M.
func logErrors(log *zerolog.Logger, level zerolog.Level, err error, msg string) {
	errs := splitErrors(err)
	for i, e := range errs {
		ev := log.WithLevel(level).Err(e)
		if len(errs) > 1 {
			ev = ev.Str("problem", fmt.Sprintf("%d/%d", i+1, len(errs)))
		}
		ev.Msg(msg)
	}
}
