package cli

import (
	"errors"

	"github.com/agentgateway/gateway/internal/config"
)

// purpose says what a command needs from the configuration.
type purpose int

const (
	forRun    purpose = iota // Discord token and backend credentials
	forChat                  // backend credentials
	forDoctor                // nothing required: report what is there
)

// loadConfig loads the configuration for a command. Invalid settings are a
// *configError (exit code 2); for forDoctor the partly valid config is
// returned along with the error.
func loadConfig(envFile string, p purpose) (*config.Config, error) {
	opts := config.LoadOptions{EnvFile: envFile}
	switch p {
	case forRun:
		opts.Require = config.RequireDiscord | config.RequireBackendCredentials
	case forChat:
		opts.Require = config.RequireBackendCredentials
	}
	cfg, err := config.Load(opts)
	if err != nil {
		var verr *config.ValidationError
		if errors.As(err, &verr) && p == forDoctor {
			return cfg, &configError{err}
		}
		return nil, &configError{err}
	}
	return cfg, nil
}
