package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// userError turns a failed turn into a message for the channel (R7.1,
// property 12). It is built only from the error's kind and HTTP status and
// fixed advice: the CLI's own message, stderr, paths and keys stay in the
// log.
func userError(e queue.Event, err error) string {
	var be *backends.Error
	if !errors.As(err, &be) {
		if errors.Is(err, context.Canceled) {
			return "⚠️ The request was cancelled before the agent finished (`canceled`)."
		}
		return "⚠️ The gateway could not run the agent (`internal_error`). The operator can find the cause in the gateway's log."
	}
	kind := string(be.Kind)
	if be.Status != 0 {
		kind = fmt.Sprintf("%s, HTTP %d", be.Kind, be.Status)
	}
	advice := adviceFor[be.Kind]
	if be.Kind == backends.KindTimeout && !be.ModelOutput {
		// Nothing came back: a smaller request would not help.
		advice = silentTimeoutAdvice
	}
	if advice == "" {
		advice = "The agent failed. The operator can find the cause in the log."
	}
	if be.Kind == backends.KindTimeout {
		return fmt.Sprintf("⏱️ Timed out (`%s`). %s", kind, advice)
	}
	return fmt.Sprintf("⚠️ The agent could not answer (`%s`). %s", kind, advice)
}

// silentTimeoutAdvice replaces the timeout advice when the model produced
// no output at all before the gateway stopped the agent.
const silentTimeoutAdvice = "The model sent nothing back before the agent was stopped. Try again later; if it keeps happening, the operator should check the model API in the log, or raise QUERY_TIMEOUT_MS for a slow model."

// adviceFor says what a user can do about each kind of failure.
var adviceFor = map[backends.ErrorKind]string{
	backends.KindAuth:         "The model API refused the credentials. The operator should check the API key.",
	backends.KindRateLimit:    "The model API is rate limiting requests. Try again in a minute.",
	backends.KindOverloaded:   "The model API is overloaded. Try again in a minute.",
	backends.KindAPI:          "The model API failed. Try again; if it keeps failing, the operator should check the log.",
	backends.KindUnreachable:  "The agent could not reach the model API. The operator should check the network and the API's address.",
	backends.KindInvalid:      "The model API rejected the request. The operator should check the model name and the log.",
	backends.KindStaleSession: "The conversation could not be resumed. Send your message again to start a new one.",
	backends.KindTimeout:      "The agent did not finish in time and was stopped. Try a smaller request, or the operator can raise QUERY_TIMEOUT_MS.",
	backends.KindCanceled:     "The request was stopped before the agent finished.",
	backends.KindCrashed:      "The agent CLI stopped unexpectedly. Try again; the operator can find the cause in the log.",
	backends.KindNotFound:     "The agent CLI is not installed on the gateway's machine. The operator should run `gateway doctor`.",
	backends.KindMaxTurns:     "The agent used all its turns before finishing. Ask for less at once, or the operator can raise AGENT_MAX_TURNS.",
	backends.KindPermission:   "The agent CLI refused its permission settings. The operator should run `gateway doctor`.",
	backends.KindExecution:    "The agent failed while working. Try again; the operator can find the cause in the log.",
}
