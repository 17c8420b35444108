package hold

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentgateway/gateway/internal/persona"
	"github.com/agentgateway/gateway/internal/schedule"
)

// schedulelessFile is read only at start: applying it reloads nothing.
const schedulelessFile = persona.BootFile

// messageLimit is Discord's limit on a message's content, in characters.
const messageLimit = 2000

// describe lists what replacing before with after in file name would
// change in what the gateway does, and the problems of after (line:
// message), at most three.
func describe(name string, before, after text) ([]schedule.Change, []string) {
	var changes []schedule.Change
	var problems []schedule.Problem
	switch name {
	case schedule.HeartbeatFile:
		old, _ := schedule.ParseHeartbeats(body(before))
		nw, ps := schedule.ParseHeartbeats(body(after))
		changes, problems = schedule.Diff(schedule.Config{Heartbeats: old}, schedule.Config{Heartbeats: nw}), ps
	case schedule.AgentsFile:
		old, _ := schedule.ParseAgents(body(before))
		nw, ps := schedule.ParseAgents(body(after))
		changes, problems = schedule.Diff(schedule.Config{Agents: old}, schedule.Config{Agents: nw}), ps
	case persona.BootFile:
		return bootChanges(before, after), nil
	}
	var lines []string
	for _, p := range problems {
		if len(lines) == 3 {
			lines = append(lines, fmt.Sprintf("…and %d more", len(problems)-3))
			break
		}
		lines = append(lines, fmt.Sprintf("line %d: %s", p.Line, p.Message))
	}
	return changes, lines
}

func body(t text) string { return t.Body }

// boot reads boot.md as the bootstrap would: a missing file is the
// built-in default.
func boot(t text) persona.BootConfig {
	if !t.Exists {
		return persona.DefaultBoot()
	}
	cfg, _ := persona.ParseBoot(t.Body)
	return cfg
}

// bootChanges lists the files boot.md makes the gateway create at start
// that are added, removed or changed (required or not, default content),
// and a change of its instructions.
func bootChanges(before, after text) []schedule.Change {
	old, nw := boot(before), boot(after)
	kind := func(c persona.BootConfig, f string) string {
		if slices.Contains(c.Required, f) {
			return "required"
		}
		return "optional"
	}
	has := func(c persona.BootConfig, f string) bool {
		return slices.Contains(c.Required, f) || slices.Contains(c.Optional, f)
	}
	files := map[string]bool{}
	for _, c := range []persona.BootConfig{old, nw} {
		for _, f := range append(slices.Clone(c.Required), c.Optional...) {
			files[f] = true
		}
	}
	var changes []schedule.Change
	for _, f := range slices.Sorted(maps.Keys(files)) {
		c := schedule.Change{Kind: "file created at start", Name: f}
		switch {
		case !has(old, f):
			c.Op, c.After, c.Instruction = "added", kind(nw, f), nw.Default(f)
		case !has(nw, f):
			c.Op, c.Before, c.Instruction = "removed", kind(old, f), old.Default(f)
		case kind(old, f) != kind(nw, f) || old.Default(f) != nw.Default(f):
			c.Op, c.Before, c.After, c.Instruction = "changed", kind(old, f), kind(nw, f), nw.Default(f)
			c.InstructionChanged = old.Default(f) != nw.Default(f)
		default:
			continue
		}
		changes = append(changes, c)
	}
	if old.Instructions != nw.Instructions {
		changes = append(changes, schedule.Change{Kind: "boot instructions", Name: persona.BootFile, Op: "changed",
			Instruction: nw.Instructions, InstructionChanged: true})
	}
	return changes
}

// heldMessage is the message that asks the approvers about h.
func heldMessage(h *Hold) string {
	head := fmt.Sprintf("⏸️ **Schedule change held for approval.** `%s` was changed while an agent turn was running tools that can write files (%s). "+
		"It is not applied: the file is back as it was and the schedule runs unchanged until an approver decides.\n\n",
		h.File, toolList(h.Tools))
	foot := "\n**Apply** writes this change and applies it; **Discard** drops it. If you made this edit yourself, press Apply."
	return head + details(h, messageLimit-utf8.RuneCountInString(head+foot)) + foot
}

// closedMessage replaces heldMessage once the hold is decided or void:
// outcome first, then what the change was.
func closedMessage(h *Hold, outcome string) string {
	head := outcome + "\n\n"
	if n := utf8.RuneCountInString(head); n > messageLimit/2 {
		head = string([]rune(head)[:messageLimit/2-2]) + "\n\n"
	}
	return head + details(h, messageLimit-utf8.RuneCountInString(head))
}

// details renders the change of h and the new file's problems in at most
// max characters.
func details(h *Hold, max int) string {
	changes, problems := describe(h.File, h.Before, h.After)
	var tail string
	if len(problems) > 0 {
		// Scheduler.ReloadFrom keeps the last good schedule of a file with
		// problems: say so, rather than promise a partial apply.
		tail = "\n⚠️ The new `" + h.File + "` has problems; while it has them the gateway keeps running what it last applied from it: " +
			neutral(strings.Join(problems, "; "), 300) + "\n"
	}
	max -= utf8.RuneCountInString(tail)
	if len(changes) == 0 {
		return "(no change to what is scheduled)" + tail
	}
	return schedule.RenderChanges(changes, max) + tail
}

// toolList names the tools for a sentence, at most four.
func toolList(tools []string) string {
	var names []string
	for i, t := range tools {
		if i == 4 {
			names = append(names, fmt.Sprintf("and %d more", len(tools)-4))
			break
		}
		names = append(names, neutral(t, 40))
	}
	if len(names) == 0 {
		return "unknown tools"
	}
	return strings.Join(names, ", ")
}

// neutral makes text that came from the agent safe to show inline: no
// markdown code spans to break out of, no mentions, on one line, at most
// max characters.
func neutral(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '`':
			return 'ˋ'
		case '\n', '\r', '\t':
			return ' '
		case '@':
			return '＠'
		case '<':
			return '‹'
		}
		return r
	}, s)
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}
