package process

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// How much of a process's stderr its exit description quotes: the last
// lines, each cut.
const (
	tailLines     = 5
	tailLineBytes = 300
)

// stderrLine logs a line of the process's stderr (read, cut at 4 KiB and
// masked by package child) under the plugin's name, within the stderr rate
// limit; the child reads on at full speed, so a flooding plugin never
// blocks on a full pipe and costs the server only what reading and
// dropping takes.
func (p *Plugin) stderrLine(pid int, s string, truncated bool) {
	ok, dropped := p.stderrLimit.allow()
	if dropped > 0 {
		p.log.Warn().Int("dropped", dropped).Msg("process plugin wrote too much to stderr; dropped lines")
	}
	if !ok {
		return
	}
	ev := p.log.Info().Str("stream", "stderr").Int("pid", pid)
	if truncated {
		ev = ev.Bool("truncated", true)
	}
	ev.Msg(s)
}

// rateLimiter is a token bucket counting what it refused.
type rateLimiter struct {
	mu      sync.Mutex
	rate    float64
	burst   float64
	tokens  float64
	last    time.Time
	dropped int
}

func newRateLimiter(perSecond, burst int) *rateLimiter {
	return &rateLimiter{rate: float64(perSecond), burst: float64(burst), tokens: float64(burst), last: time.Now()}
}

// allow takes a token. When it lets a line through after refusing some, it
// also returns how many it refused since, for the caller to report.
func (l *rateLimiter) allow() (ok bool, dropped int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens < 1 {
		l.dropped++
		return false, 0
	}
	l.tokens--
	dropped, l.dropped = l.dropped, 0
	return true, dropped
}

// flush returns the count of refused lines not reported yet.
func (l *rateLimiter) flush() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.dropped
	l.dropped = 0
	return d
}

// secretMasker returns a replacer of every secret (6 bytes or longer) by
// "[REDACTED]", or nil when there is none.
func secretMasker(secrets []string) *strings.Replacer {
	// Longest first: at one position the replacer takes the first match in
	// argument order, so a secret that contains another is masked whole.
	secrets = slices.Clone(secrets)
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	var pairs []string
	for _, s := range secrets {
		if len(s) >= minSecretLen {
			pairs = append(pairs, s, redactedText)
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	return strings.NewReplacer(pairs...)
}

const (
	minSecretLen = 6
	redactedText = "[REDACTED]"
)

// redact masks the plugin's secrets in text the plugin wrote.
func (p *Plugin) redact(text string) string {
	if p.mask == nil {
		return text
	}
	return p.mask.Replace(text)
}
