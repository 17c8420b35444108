package schedule

import (
	"time"
)

// Heartbeat is one proactive check from heartbeat.md (R17.1).
type Heartbeat struct {
	Name        string
	Interval    time.Duration // at least MinInterval
	Instruction string
	// Channel is the Discord channel the reply goes to; empty means the
	// scheduler's default output channel.
	Channel string
	// Model overrides the backend's model; empty means the default.
	Model string
}

// heartbeatKeys are the keys a check accepts.
var heartbeatKeys = []string{keyInterval, keyInstruction, keyChannel, keyModel}

// ParseHeartbeats parses heartbeat.md. Each "## name" section is a check:
//
//	## check-email
//	Interval: 1800
//	Instruction: Check my inbox for anything urgent.
//	  More lines continue the instruction until the next key or heading.
//	Channel: 1475008084022788312
//	Model: sonnet
//
// Interval (seconds, at least 60) and Instruction are required, Channel and
// Model optional; keys are case-insensitive. A "# Title" and the text before
// the first check are ignored. HTML comments are skipped wherever they are;
// a fenced code block is skipped too, except inside an Instruction, whose
// text it is (so an instruction can show a reply format). A check with any problem is left out and the
// problem reported; the other checks still parse. Of two checks with the same
// name the first wins.
func ParseHeartbeats(text string) ([]Heartbeat, []Problem) {
	lines, problems := scan(HeartbeatFile, text)
	var (
		checks []Heartbeat
		cur    *item
		seen   = map[string]bool{}
	)
	finish := func() {
		if cur == nil {
			return
		}
		if h, ok := buildHeartbeat(cur, seen); ok {
			checks = append(checks, h)
		}
		problems = append(problems, cur.problems...)
		cur = nil
	}
	for _, l := range lines {
		level, name := 0, ""
		if !l.code {
			level, name = heading(l.text)
		}
		switch {
		case level == 0:
			if cur != nil {
				cur.add(l)
			}
		case level == 2:
			finish()
			cur = newItem(HeartbeatFile, "check", name, l.num, heartbeatKeys...)
		case level == 1:
			finish()
		default:
			if cur != nil {
				cur.problemf(l.num, "check %q: unexpected heading %q (checks are \"## name\" sections)", cur.name, l.text)
				finish()
			}
		}
	}
	finish()
	return checks, problems
}

// buildHeartbeat validates a check's fields. It reports every problem and
// returns false if there is any.
func buildHeartbeat(it *item, seen map[string]bool) (Heartbeat, bool) {
	switch {
	case it.name == "":
		it.problemf(it.line, "a check has an empty name")
	case seen[it.name]:
		it.problemf(it.line, "check %q is defined twice: the first one counts", it.name)
	default:
		seen[it.name] = true
	}
	h := Heartbeat{Name: it.name}
	if v, line, ok := it.require(keyInterval); ok {
		d, err := parseInterval(v)
		if err != nil {
			it.problemf(line, "check %q: %v", it.name, err)
		}
		h.Interval = d
	}
	h.Instruction, _, _ = it.require(keyInstruction)
	var line int
	if h.Channel, line = it.get(keyChannel); h.Channel != "" {
		if err := checkChannel(h.Channel); err != nil {
			it.problemf(line, "check %q: %v", it.name, err)
		}
	}
	h.Model, _ = it.get(keyModel)
	if len(it.problems) > 0 {
		return Heartbeat{}, false
	}
	return h, true
}
