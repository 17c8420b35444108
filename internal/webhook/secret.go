package webhook

import (
	"fmt"
	"strings"

	"github.com/agentgateway/gateway/internal/config"
)

// Rules for a webhook's secret. The variable must be named WEBHOOK_...:
// those are never passed to the agent CLI, whatever its allowlist, so the
// agent cannot read the secret and forge deliveries (a variable such as
// LANG would be both guessable and handed to the agent). The value must be
// long enough not to be guessed.
const (
	SecretPrefix   = config.WebhookSecretPrefix
	MinSecretBytes = config.MinSecretBytes
)

// SecretProblem says why a webhook whose Secret-Env is env, and whose
// variable holds value (set reports whether it is set at all), is
// disabled; "" when the secret meets the rules. It never quotes the value.
func SecretProblem(env, value string, set bool) string {
	switch {
	case !strings.HasPrefix(env, SecretPrefix):
		return fmt.Sprintf("Secret-Env %s does not start with %s: name the variable %s... (those are never passed to the agent CLI)", env, SecretPrefix, SecretPrefix)
	case !set || value == "":
		return fmt.Sprintf("%s is not set", env)
	case len(value) < MinSecretBytes:
		return fmt.Sprintf("%s is %d bytes long; a webhook secret must have at least %d (e.g. openssl rand -hex 32)", env, len(value), MinSecretBytes)
	}
	return ""
}
