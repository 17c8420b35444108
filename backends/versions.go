package backends

// Tested lists, per backend, the CLI versions the conformance suite runs
// against (`make conformance`). `gateway doctor` compares the installed CLI
// with it: CLIs change their flags and stream formats between versions.
var Tested = map[string]string{
	"claude":   "2.1.330",
	"codex":    "0.169.0",
	"gemini":   "0.61.0",
	"opencode": "1.18.33",
	"pi":       "0.73.1",
}
