package bot

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
)

// NewLogger returns the server's logger as config.yaml's log section asks
// for, writing to w (os.Stderr when nil).
func NewLogger(cfg config.Log, w io.Writer) (zerolog.Logger, error) {
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
	if cfg.Format == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger(), nil
}
