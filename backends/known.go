package backends

import (
	"regexp"
	"strings"
	"sync"
)

// What the gateway knows of each CLI for a person who picks a model or
// carries a session between Discord and a terminal.

// knownModels are the model names each CLI takes with --model, aliases
// first, from the pinned CLIs themselves (see notes/agent-clis.md): claude
// 2.1.330's aliases and model ids, codex 0.169.0's slugs, gemini-cli
// 0.61.0's aliases and models; opencode and pi take provider/model.
var knownModels = map[string][]string{
	"claude": {
		"sonnet", "opus", "haiku", "fable", "best", "opusplan", "sonnet[1m]", "opus[1m]",
		"claude-opus-5-5", "claude-sonnet-5-5", "claude-haiku-5-5", "claude-fable-5-2",
		"claude-opus-5", "claude-sonnet-5", "claude-opus-4-8", "claude-opus-4-7",
		"claude-sonnet-4-6", "claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1",
	},
	"codex": {
		"gpt-5.5", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna",
		"gpt-6-sol", "gpt-6-luna", "gpt-6-astra", "gpt-6.1-sol", "gpt-6.1-terra",
	},
	"gemini": {
		"auto", "pro", "flash", "flash-lite",
		"gemini-2.5-pro", "gemini-3-pro-preview", "gemini-3.1-pro-preview", "gemini-3-flash-preview",
		"gemini-3.5-flash", "gemini-3.8-flash", "gemini-3.5-flash-lite",
	},
	"opencode": {
		"anthropic/claude-sonnet-5-5", "anthropic/claude-opus-5-5", "anthropic/claude-haiku-5-5",
		"openai/gpt-5.5", "google/gemini-2.5-pro",
	},
	"pi": {
		"sonnet", "opus", "haiku",
		"anthropic/claude-sonnet-5-5", "anthropic/claude-opus-5-5",
		"openai/gpt-5.5", "google/gemini-2.5-pro",
	},
}

// KnownModels returns the model names the backend's CLI is known to take,
// aliases first; nil for a backend the gateway knows none of. The caller
// may change the slice.
func KnownModels(backend string) []string {
	return append([]string(nil), knownModels[backend]...)
}

var (
	uuidID = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	})
	opencodeID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ses_[A-Za-z0-9]{1,64}$`) })
	// otherID is what an id of a CLI the gateway knows less of may hold:
	// one argument that cannot pass for a flag or a path.
	otherID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`) })
)

func isUUID(id string) bool { return uuidID().MatchString(id) }

// ValidSessionID reports whether id has the form of the backend's session
// ids: a UUID for claude, codex, gemini and pi, ses_… for opencode, and
// for others a short word of letters, digits and . _ : - that does not
// start like a flag.
func ValidSessionID(backend, id string) bool {
	switch backend {
	case "claude", "codex", "gemini", "pi":
		return isUUID(id)
	case "opencode":
		return opencodeID().MatchString(id)
	}
	return otherID().MatchString(id) && !strings.Contains(id, "..")
}

// ResumeArgs is the command line that continues session id of the backend
// in a terminal, in the directory the session belongs to (verified with
// each pinned CLI's --help): claude --resume, codex resume, gemini
// --resume, opencode --session, pi --session. Nil for a backend without a
// known way.
func ResumeArgs(backend, id string) []string {
	switch backend {
	case "claude":
		return []string{"claude", "--resume", id}
	case "codex":
		return []string{"codex", "resume", id}
	case "gemini":
		return []string{"gemini", "--resume", id}
	case "opencode":
		return []string{"opencode", "--session", id}
	case "pi":
		return []string{"pi", "--session", id}
	}
	return nil
}
