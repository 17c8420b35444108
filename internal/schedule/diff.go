package schedule

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// The operations a Change reports.
const (
	OpAdded   = "added"
	OpChanged = "changed"
	OpRemoved = "removed"
)

// The kinds of item Diff reports.
const (
	kindHeartbeat = "heartbeat"
	kindCron      = "cron job"
	kindHook      = "hook"
	kindWebhook   = "webhook"
)

// Change is one difference between two schedules: an item added, changed
// or removed.
type Change struct {
	// Kind is what the item is: "heartbeat", "cron job", "hook" or
	// "webhook".
	Kind string
	// Name is the item's name; for a hook, the hook's name.
	Name string
	// Op is OpAdded, OpChanged or OpRemoved.
	Op string
	// Before and After describe the item's settings other than its
	// instruction on one line, as they were and as they will be: for a cron
	// job "0 9 * * 1-5 (Europe/Paris), channel 123, model sonnet", for a
	// heartbeat "every 30m0s, default channel", for a webhook
	// "POST /hooks/deploy, secret from DEPLOY_SECRET, channel 123". Each is
	// empty where the item is absent; both are empty for hooks, which have
	// nothing but an instruction.
	Before, After string
	// Instruction is the item's instruction as it will be; for a removed
	// item, the instruction it had.
	Instruction string
	// InstructionChanged says whether Instruction differs from before. It
	// is true for every added or removed item.
	InstructionChanged bool
}

// version is one item of a schedule as Diff compares it.
type version struct {
	def         any // the Heartbeat, CronJob, Webhook or hook instruction; compared with ==
	settings    string
	instruction string
}

// Diff lists what applying after in place of before would change: the
// heartbeats, then the cron jobs, the hooks (in HookNames order, then any
// other hook by name) and the webhooks, each kind by name. An item whose
// every field is equal is not listed, and the order of items within a list
// does not matter, so equal configs give nil. Of two items of one kind with
// the same name the last counts, as in Scheduler.Apply.
func Diff(before, after Config) []Change {
	var changes []Change
	changes = diffKind(changes, kindHeartbeat, nil,
		versions(before.Heartbeats, heartbeatVersion), versions(after.Heartbeats, heartbeatVersion))
	changes = diffKind(changes, kindCron, nil,
		versions(before.Agents.CronJobs, cronVersion), versions(after.Agents.CronJobs, cronVersion))
	changes = diffKind(changes, kindHook, hookOrder,
		hookVersions(before.Agents.Hooks), hookVersions(after.Agents.Hooks))
	changes = diffKind(changes, kindWebhook, nil,
		versions(before.Agents.Webhooks, webhookVersion), versions(after.Agents.Webhooks, webhookVersion))
	return changes
}

// diffKind appends the changes between two sets of items of one kind.
// order sorts their names; nil means alphabetically.
func diffKind(changes []Change, kind string, order func([]string) []string, before, after map[string]version) []Change {
	names := slices.Collect(maps.Keys(before))
	for name := range after {
		if _, ok := before[name]; !ok {
			names = append(names, name)
		}
	}
	if order == nil {
		slices.Sort(names)
	} else {
		names = order(names)
	}
	for _, name := range names {
		old, hadOld := before[name]
		nw, hasNew := after[name]
		c := Change{Kind: kind, Name: name}
		switch {
		case !hadOld:
			c.Op, c.After, c.Instruction, c.InstructionChanged = OpAdded, nw.settings, nw.instruction, true
		case !hasNew:
			c.Op, c.Before, c.Instruction, c.InstructionChanged = OpRemoved, old.settings, old.instruction, true
		case old.def != nw.def:
			c.Op, c.Before, c.After, c.Instruction = OpChanged, old.settings, nw.settings, nw.instruction
			c.InstructionChanged = old.instruction != nw.instruction
		default:
			continue
		}
		changes = append(changes, c)
	}
	return changes
}

// versions indexes items by name; of two with the same name the last wins.
func versions[T any](items []T, describe func(T) (string, version)) map[string]version {
	m := make(map[string]version, len(items))
	for _, it := range items {
		name, v := describe(it)
		m[name] = v
	}
	return m
}

func heartbeatVersion(h Heartbeat) (string, version) {
	s := "every " + h.Interval.String() + ", " + channelSetting(h.Channel, "default channel") + modelSetting(h.Model)
	return h.Name, version{def: h, settings: s, instruction: h.Instruction}
}

func cronVersion(c CronJob) (string, version) {
	s := c.Cron
	if c.Timezone != "" {
		s += " (" + c.Timezone + ")"
	}
	s += ", " + channelSetting(c.Channel, "default channel") + modelSetting(c.Model)
	if c.Paused {
		s += ", paused"
	}
	return c.Name, version{def: c, settings: s, instruction: c.Instruction}
}

func webhookVersion(w Webhook) (string, version) {
	s := "POST /hooks/" + w.Name + ", secret from " + w.SecretEnv + ", " + channelSetting(w.Channel, "no channel (the result is only logged)")
	return w.Name, version{def: w, settings: s, instruction: w.Instruction}
}

func hookVersions(hooks map[Hook]string) map[string]version {
	m := make(map[string]version, len(hooks))
	for h, instr := range hooks {
		m[string(h)] = version{def: instr, instruction: instr}
	}
	return m
}

func channelSetting(channel, none string) string {
	if channel == "" {
		return none
	}
	return "channel " + channel
}

func modelSetting(model string) string {
	if model == "" {
		return ""
	}
	return ", model " + model
}

// hookOrder sorts hook names in lifecycle order, names that are not hooks
// last and alphabetically.
func hookOrder(names []string) []string {
	rank := func(name string) int {
		if i := slices.Index(HookNames, Hook(name)); i >= 0 {
			return i
		}
		return len(HookNames)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return names
}

// Limits, in runes, on the untrusted text of one rendered change.
const (
	nameLimit        = 100
	settingsLimit    = 200
	instructionLimit = 400
	// minInstruction is the shortest cut of an instruction shown to make the
	// last change fit; below it the change is left out instead.
	minInstruction = 20
)

// RenderChanges writes changes as Discord markdown of at most max runes,
// for a human deciding whether to apply them: one block per change, its
// kind, name and settings on one line and its instruction in a code block,
// cut to 400 runes. If not every change fits, it renders as many as fit,
// in order, and ends with a line saying how many are left out. max should
// be at least 200; the result never exceeds it.
//
// Names, settings and instructions are treated as untrusted: they are shown
// only inside code spans and code blocks, with every backtick replaced by
// 'ˋ' (U+02CB) so that none can close its span or block, and with a zero-width
// space on each side of every '@' so that no "@everyone", "@here" or "<@"
// mention can form, even where the message is sent with pings allowed.
// Code blocks are never cut: the output's fences always pair up.
func RenderChanges(changes []Change, max int) string {
	blocks := make([]string, len(changes))
	total := len(changes) - 1 // the newlines between blocks
	for i, c := range changes {
		blocks[i] = renderChange(c, instructionLimit)
		total += runeCount(blocks[i])
	}
	if total <= max {
		return strings.Join(blocks, "\n")
	}

	// Not everything fits: show the changes that do, each leaving room for
	// the line that counts the rest.
	var shown []string
	used := 0
	for i, c := range changes {
		room := max - used
		if i > 0 {
			room-- // the newline before this block
		}
		if left := len(changes) - i - 1; left > 0 {
			room -= 1 + runeCount(moreLine(left))
		}
		b := blocks[i]
		if runeCount(b) > room {
			b = fitChange(c, room)
		}
		if b == "" {
			break
		}
		shown = append(shown, b)
		used += runeCount(b)
		if i > 0 {
			used++
		}
		if b != blocks[i] {
			break // the room is spent
		}
	}
	if left := len(changes) - len(shown); left > 0 {
		more := moreLine(left)
		if len(shown) == 0 {
			return cut(more, max)
		}
		shown = append(shown, more)
	}
	return strings.Join(shown, "\n")
}

// fitChange renders c in at most room runes by cutting its instruction
// shorter, or returns "" if it cannot keep minInstruction runes of it.
func fitChange(c Change, room int) string {
	if runeCount(renderChange(c, minInstruction)) > room {
		return ""
	}
	lo, hi := minInstruction, instructionLimit // renderChange(c, lo) fits
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if runeCount(renderChange(c, mid)) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return renderChange(c, lo)
}

// moreLine says how many changes are not shown.
func moreLine(n int) string {
	if n == 1 {
		return "…and 1 more change not shown."
	}
	return fmt.Sprintf("…and %d more changes not shown.", n)
}

// renderChange renders one change with its instruction cut to instrMax
// runes.
func renderChange(c Change, instrMax int) string {
	var b strings.Builder
	switch c.Op {
	case OpAdded:
		b.WriteString("➕ ")
	case OpChanged:
		b.WriteString("✏️ ")
	case OpRemoved:
		b.WriteString("➖ ")
	default:
		b.WriteString("• " + inline(c.Op, nameLimit) + " ")
	}
	b.WriteString("**" + inline(c.Kind, nameLimit) + "** ")
	if c.Name == "" {
		b.WriteString("(no name)")
	} else {
		b.WriteString(codeSpan(c.Name, nameLimit))
	}
	settings, was := c.After, ""
	switch {
	case c.Op == OpRemoved:
		settings = c.Before
	case c.Op == OpChanged && c.Before != c.After:
		was = c.Before
	case c.After == "":
		settings = c.Before
	}
	if settings != "" {
		b.WriteString(": " + codeSpan(settings, settingsLimit))
	}
	if was != "" {
		b.WriteString(" (was: " + codeSpan(was, settingsLimit) + ")")
	}
	b.WriteString("\n")
	if c.Op == OpChanged {
		if !c.InstructionChanged {
			b.WriteString("Instruction unchanged.")
			return b.String()
		}
		b.WriteString("New instruction:\n")
	}
	if strings.TrimSpace(c.Instruction) == "" {
		b.WriteString("_(no instruction)_")
		return b.String()
	}
	b.WriteString("```text\n" + defuse(normalizeNewlines(cut(c.Instruction, instrMax)), false) + "\n```")
	return b.String()
}

// codeSpan shows untrusted text as inline code on one line, cut to max
// runes.
func codeSpan(s string, max int) string {
	return "`" + inline(s, max) + "`"
}

// inline makes untrusted text safe inside a code span: cut to max runes,
// on one line, without backticks or mentions.
func inline(s string, max int) string {
	return defuse(cut(s, max), true)
}

func normalizeNewlines(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
}

// zwsp is a zero-width space.
const zwsp = '\u200b'

// defuse replaces backticks with 'ˋ' and puts a zero-width space on each
// side of every '@'. With oneLine, it also turns line breaks and tabs
// into spaces.
func defuse(s string, oneLine bool) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '`':
			b.WriteRune('ˋ')
		case r == '@':
			b.WriteRune(zwsp)
			b.WriteRune('@')
			b.WriteRune(zwsp)
		case oneLine && (r == '\n' || r == '\r' || r == '\t'):
			b.WriteByte(' ')
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut shortens s to at most n runes, ending it with "…" if it was longer.
func cut(s string, n int) string {
	if runeCount(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func runeCount(s string) int { return utf8.RuneCountInString(s) }
