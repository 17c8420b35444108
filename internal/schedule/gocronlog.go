package schedule

import "github.com/rs/zerolog"

// gocronLogger passes gocron's own log lines to zerolog. gocron logs
// key-value pairs after the message, like slog. Its debug lines are dropped:
// they are noise, and its executor writes one after Shutdown has returned.
// Its info lines ("scheduler started") are ours at debug level.
type gocronLogger struct{ log zerolog.Logger }

func (l gocronLogger) Debug(string, ...any)          {}
func (l gocronLogger) Info(msg string, args ...any)  { l.log.Debug().Fields(args).Msg(msg) }
func (l gocronLogger) Warn(msg string, args ...any)  { l.log.Warn().Fields(args).Msg(msg) }
func (l gocronLogger) Error(msg string, args ...any) { l.log.Error().Fields(args).Msg(msg) }
