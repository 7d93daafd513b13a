package usage

import (
	"testing"
	"time"
)

func TestFormatCount(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0", 7: "7", 999: "999", 1000: "1,000", 12345: "12,345", 123456: "123,456",
		1234567: "1,234,567", -1234: "-1,234", -999: "-999",
	} {
		if got := FormatCount(n); got != want {
			t.Errorf("FormatCount(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFormatUntil(t *testing.T) {
	for d, want := range map[time.Duration]string{
		20 * time.Second: "in less than a minute", 20 * time.Minute: "in 20 min",
		4*time.Hour + 41*time.Minute + 20*time.Second: "in 4 h 41 min", 10 * time.Hour: "in 10 h 00 min",
	} {
		if got := FormatUntil(d); got != want {
			t.Errorf("FormatUntil(%s) = %q, want %q", d, got, want)
		}
	}
}
