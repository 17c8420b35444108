package cli

import (
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
)

// newLogger builds the process logger on w (stderr): console output for a
// person, JSON for a log collector. minLevel, if set, is used when the
// config asks for a lower level (chat keeps the terminal quiet).
func newLogger(cfg *config.Config, w io.Writer, minLevel string) zerolog.Logger {
	if cfg.LogFormat != "json" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	}
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	if min, err := zerolog.ParseLevel(minLevel); err == nil && minLevel != "" && min > level {
		level = min
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}
