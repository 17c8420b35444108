package cli

import (
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/config"
)

// newLogger builds the process logger on w (stderr): console output for a
// person, JSON for a log collector.
//
// Durations are logged as whole milliseconds under a key that ends in
// "_ms": Int64("took_ms", d.Milliseconds()). zerolog's Dur writes a float
// in a unit set by package globals, which nothing here sets (a logger in
// a test or a library user would not get them), so it is not used
// (TestDurationsAreLoggedInMilliseconds).
func newLogger(cfg *config.Config, w io.Writer, level zerolog.Level) zerolog.Logger {
	if cfg.LogFormat != "json" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly, NoColor: !isTerminal(w)}
	}
	return zerolog.New(w).Level(level).With().Timestamp().Logger()
}

// configLevel is LOG_LEVEL (info when unset).
func configLevel(cfg *config.Config) zerolog.Level {
	level, err := zerolog.ParseLevel(cfg.LogLevel)
	if err != nil || cfg.LogLevel == "" {
		return zerolog.InfoLevel
	}
	return level
}

// chatLevel is chat's log level. The conversation is on the same terminal,
// so chat logs warnings and errors only, unless LOG_LEVEL is set (it is
// honoured as given) or --verbose asks for info (or LOG_LEVEL if lower).
func chatLevel(cfg *config.Config, verbose bool) zerolog.Level {
	level := configLevel(cfg)
	explicit := cfg.IsSet(config.EnvLogLevel)
	switch {
	case verbose:
		return min(level, zerolog.InfoLevel)
	case explicit:
		return level
	}
	return zerolog.WarnLevel
}
