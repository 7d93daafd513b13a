package console

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// DefaultLogLines is how many lines a LogBuffer keeps when NewLogBuffer is
// given no size.
const DefaultLogLines = 2000

// LogLine is one log line, parsed.
type LogLine struct {
	Time    time.Time
	Level   string
	Message string
	// Fields are the line's other fields as key=value text, sorted by key
	// (the error first).
	Fields string
}

// LogBuffer keeps the last lines the server logged, for the logs page. It
// is an io.Writer for zerolog's JSON lines (add it to the logger's writers
// with zerolog.MultiLevelWriter); lines reach it already masked. Write and
// Lines are safe for concurrent use.
type LogBuffer struct {
	mu    sync.Mutex
	lines []LogLine
	next  int
	full  bool
}

// NewLogBuffer returns a buffer of the last n lines (DefaultLogLines when
// n <= 0).
func NewLogBuffer(n int) *LogBuffer {
	if n <= 0 {
		n = DefaultLogLines
	}
	return &LogBuffer{lines: make([]LogLine, n)}
}

// Write adds the lines in p (zerolog writes one JSON object per call). It
// never fails: a line that is not JSON is kept as its text.
func (b *LogBuffer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		var line []byte
		line, p, _ = bytes.Cut(p, []byte{'\n'})
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		l := parseLogLine(line)
		b.mu.Lock()
		b.lines[b.next] = l
		b.next++
		if b.next == len(b.lines) {
			b.next, b.full = 0, true
		}
		b.mu.Unlock()
	}
	return n, nil
}

// levelRank orders zerolog's level names; unknown levels rank as info.
func levelRank(l string) int {
	lv, err := zerolog.ParseLevel(l)
	if err != nil || l == "" {
		return int(zerolog.InfoLevel)
	}
	return int(lv)
}

// Lines returns the kept lines at level minLevel ("debug", "info", "warn",
// "error"; "" for all) or above, newest first, at most limit (all when
// limit <= 0).
func (b *LogBuffer) Lines(minLevel string, limit int) []LogLine {
	min := -10
	if minLevel != "" {
		min = levelRank(minLevel)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.next
	if b.full {
		n = len(b.lines)
	}
	var out []LogLine
	for i := 0; i < n; i++ {
		l := b.lines[(b.next-1-i+len(b.lines))%len(b.lines)]
		if levelRank(l.Level) < min {
			continue
		}
		out = append(out, l)
		if limit > 0 && len(out) == limit {
			break
		}
	}
	return out
}

func parseLogLine(line []byte) LogLine {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return LogLine{Message: string(line)}
	}
	var l LogLine
	str := func(k string) string {
		raw, ok := m[k]
		if !ok {
			return ""
		}
		delete(m, k)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	l.Level = str(zerolog.LevelFieldName)
	l.Message = str(zerolog.MessageFieldName)
	if ts := str(zerolog.TimestampFieldName); ts != "" {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.Time = t
		} else if f, err := strconv.ParseFloat(ts, 64); err == nil {
			l.Time = unixTime(f)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		switch {
		case a == zerolog.ErrorFieldName:
			return -1
		case b == zerolog.ErrorFieldName:
			return 1
		}
		return strings.Compare(a, b)
	})
	var f strings.Builder
	for _, k := range keys {
		if f.Len() > 0 {
			f.WriteByte(' ')
		}
		f.WriteString(k)
		f.WriteByte('=')
		var s string
		if json.Unmarshal(m[k], &s) == nil {
			if s == "" || strings.ContainsAny(s, " \t\n\"=") {
				s = strconv.Quote(s)
			}
			f.WriteString(s)
		} else {
			f.Write(m[k])
		}
	}
	l.Fields = f.String()
	return l
}

// unixTime reads zerolog's Unix time formats (seconds, milliseconds,
// microseconds), told apart by their size.
func unixTime(f float64) time.Time {
	switch {
	case f > 1e15:
		return time.UnixMicro(int64(f))
	case f > 1e12:
		return time.UnixMilli(int64(f))
	default:
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9))
	}
}
