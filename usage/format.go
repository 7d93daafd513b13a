package usage

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// FormatUntil says how long d is from now, roughly, for a person: "in 4 h
// 05 min", "in 12 min", "in less than a minute".
func FormatUntil(d time.Duration) string {
	d = d.Round(time.Minute)
	switch {
	case d < time.Minute:
		return "in less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()))
	default:
		return fmt.Sprintf("in %d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
}

// FormatCount writes a token count with thousands separators: 1234567 →
// "1,234,567".
func FormatCount(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
