package schedule

import (
	"fmt"
	"slices"
	"strings"
)

// Keys, in lower case as keyValue returns them.
const (
	keyInterval    = "interval"
	keyInstruction = "instruction"
	keyChannel     = "channel"
	keyModel       = "model"
	keyCron        = "cron"
	keyTimezone    = "timezone"
	keySecretEnv   = "secret-env"
	keyPaused      = "paused"
)

// keyNames spells each key as the documentation does, for messages.
var keyNames = map[string]string{
	keyInterval:    "Interval",
	keyInstruction: "Instruction",
	keyChannel:     "Channel",
	keyModel:       "Model",
	keyCron:        "Cron",
	keyTimezone:    "Timezone",
	keySecretEnv:   "Secret-Env",
	keyPaused:      "Paused",
}

// field is one key's value and the line it was set on.
type field struct {
	value string
	line  int
}

// item collects the "Key: value" lines of one heading's section: a heartbeat
// check, a cron job, a hook or a webhook.
//
// Instruction may span lines: every line after it belongs to it until the
// next known key or heading, code blocks included. Any other line that is
// not blank is a problem, so a misspelt key is reported, not ignored.
type item struct {
	file   string
	kind   string // "check", "cron job", "hook", "webhook": for messages
	name   string
	line   int      // the heading's line
	known  []string // the keys this kind accepts
	fields map[string]field

	instruction []string // lines of a multi-line Instruction, while open
	inInstr     bool
	problems    []Problem
}

func newItem(file, kind, name string, line int, known ...string) *item {
	return &item{file: file, kind: kind, name: name, line: line, known: known, fields: map[string]field{}}
}

// add consumes one line of the item's section.
func (it *item) add(l line) {
	if !l.code {
		if key, value, ok := keyValue(l.text); ok && slices.Contains(it.known, key) {
			it.closeInstruction()
			if _, dup := it.fields[key]; dup {
				it.problemf(l.num, "%s %q sets %s twice", it.kind, it.name, keyNames[key])
				return
			}
			it.fields[key] = field{value: value, line: l.num}
			if key == keyInstruction {
				it.inInstr = true
				it.instruction = []string{value}
			}
			return
		}
	}
	switch {
	case it.inInstr:
		it.instruction = append(it.instruction, l.text)
	case l.code || strings.TrimSpace(l.text) == "":
	default:
		if key, _, ok := keyValue(l.text); ok {
			it.problemf(l.num, "%s %q: unknown key %q (known: %s)", it.kind, it.name, key, it.knownList())
		} else {
			it.problemf(l.num, "%s %q: expected a \"Key: value\" line, got text outside an Instruction", it.kind, it.name)
		}
	}
}

// closeInstruction ends a multi-line Instruction: its lines are joined and
// trimmed of surrounding blank space.
func (it *item) closeInstruction() {
	if !it.inInstr {
		return
	}
	f := it.fields[keyInstruction]
	f.value = strings.TrimSpace(strings.Join(it.instruction, "\n"))
	it.fields[keyInstruction] = f
	it.inInstr, it.instruction = false, nil
}

// get returns a key's value ("" when unset) and its line (the heading's
// when unset, so a problem about a missing key points at the item).
func (it *item) get(key string) (string, int) {
	it.closeInstruction()
	if f, ok := it.fields[key]; ok {
		return f.value, f.line
	}
	return "", it.line
}

// require returns a key's value, or reports it missing and returns false.
func (it *item) require(key string) (string, int, bool) {
	v, line := it.get(key)
	if v == "" {
		if _, set := it.fields[key]; set {
			it.problemf(line, "%s %q: %s is empty", it.kind, it.name, keyNames[key])
		} else {
			it.problemf(line, "%s %q has no %s", it.kind, it.name, keyNames[key])
		}
		return "", line, false
	}
	return v, line, true
}

func (it *item) problemf(line int, format string, args ...any) {
	it.problems = append(it.problems, Problem{File: it.file, Line: line, Message: fmt.Sprintf(format, args...)})
}

func (it *item) knownList() string {
	names := make([]string, len(it.known))
	for i, k := range it.known {
		names[i] = keyNames[k]
	}
	return strings.Join(names, ", ")
}
