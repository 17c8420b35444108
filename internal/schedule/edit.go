package schedule

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"
)

// Errors of the agents.md editors besides ErrNoCronJob.
var (
	ErrCronJobExists = errors.New("a cron job with this name already exists")
	// ErrInvalidCronJob: the job is in agents.md but does not parse, so
	// there is nothing sound to change; it can still be deleted.
	ErrInvalidCronJob = errors.New("the cron job has problems in agents.md: fix it by hand or delete it")
	// ErrUnsafeEdit: the edit would have changed agents.md beyond the one
	// job, typically because a comment or code block is left open.
	ErrUnsafeEdit = errors.New("agents.md cannot be edited safely around this cron job (is a comment or code block left open?): edit it by hand")
)

// cronNameRE is what AddCronJob accepts as a name: the parser takes any
// heading, but a name the agent picks is also an action's id and a log
// field, so it is kept plain.
var cronNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_-]{1,64}$`) })

// CronChange names the fields of a cron job to change; a nil field is left
// as it is. An empty Channel or Model removes the key, so the default
// applies again.
type CronChange struct {
	Cron        *string
	Instruction *string
	Channel     *string
	Model       *string
	Paused      *bool
}

// AddCronJob returns text with j added as the last job of the last
// "## Cron Jobs" section, or of a new one at the end of the file when there
// is none. The rest of the file is kept byte for byte (a missing line break
// at its very end is added).
//
// j is checked as the scheduler would check it: Name is 1 to 64 of a-z, 0-9,
// '_' and '-' and no job has it yet (in any case), Cron is a valid
// expression, Channel a channel id, Timezone an IANA zone, Instruction not
// empty. Name, Cron, Channel, Model and Timezone must be one line.
// Instruction may span lines: the lines after the first become the
// Instruction's continuation lines, so none of them may read as a heading,
// a cron job key or an HTML comment, and a code block it opens must close;
// anything else is refused, never escaped. Surrounding white space is
// trimmed. The result is parsed again and refused (ErrUnsafeEdit) unless
// it has exactly one more job, j.
func AddCronJob(text string, j CronJob) (string, error) {
	j, err := cleanCronJob(j)
	if err != nil {
		return "", err
	}
	if !cronNameRE().MatchString(j.Name) {
		return "", fmt.Errorf("the name %q is not 1 to 64 of a-z, 0-9, '_' and '-'", j.Name)
	}
	d := readDoc(text)
	for _, s := range d.sections {
		for _, p := range s.jobs {
			if strings.EqualFold(p.name, j.Name) {
				return "", fmt.Errorf("%q: %w", j.Name, ErrCronJobExists)
			}
		}
	}
	var out string
	if len(d.sections) == 0 {
		out = d.withSection(jobLines(j, d.eol))
	} else {
		out = d.withJob(d.sections[len(d.sections)-1], jobLines(j, d.eol))
	}
	return verified(text, out, func(a *Agents) { a.CronJobs = append(a.CronJobs, j) })
}

// UpdateCronJob returns text with the fields c names changed in the cron
// job name. Only the lines of those fields change: a changed key's line
// (for Instruction, with its continuation lines) is replaced, an emptied
// one removed, a new one added after the Cron line. Values are checked as
// in AddCronJob. A job that does not parse fails with ErrInvalidCronJob.
func UpdateCronJob(text, name string, c CronChange) (string, error) {
	before, _ := ParseAgents(text)
	d := readDoc(text)
	place, ok := d.find(name)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrNoCronJob, name)
	}
	i := slices.IndexFunc(before.CronJobs, func(j CronJob) bool { return j.Name == name })
	if i < 0 {
		return "", fmt.Errorf("%q: %w", name, ErrInvalidCronJob)
	}
	old := before.CronJobs[i]
	nw := old
	// Only the values given are checked: a job the parser took may hold
	// values an edit could not write, and those are kept as they are.
	for _, f := range []struct {
		key string
		in  *string
		out *string
	}{
		{keyCron, c.Cron, &nw.Cron},
		{keyInstruction, c.Instruction, &nw.Instruction},
		{keyChannel, c.Channel, &nw.Channel},
		{keyModel, c.Model, &nw.Model},
	} {
		if f.in == nil {
			continue
		}
		v, err := cleanValue(f.key, *f.in)
		if err != nil {
			return "", err
		}
		*f.out = v
	}
	if c.Paused != nil {
		nw.Paused = *c.Paused
	}
	if nw == old {
		return text, nil
	}

	var edits []edit
	var added []string
	set := func(key, was, is string) {
		if was == is {
			return
		}
		sp, ok := place.fields[key]
		switch {
		case ok && is == "":
			edits = append(edits, edit{sp, nil})
		case ok:
			edits = append(edits, edit{sp, renderKey(key, is, d.eol)})
		default:
			added = append(added, renderKey(key, is, d.eol)...)
		}
	}
	set(keyCron, old.Cron, nw.Cron)
	set(keyChannel, old.Channel, nw.Channel)
	set(keyModel, old.Model, nw.Model)
	set(keyPaused, pausedValue(old.Paused), pausedValue(nw.Paused))
	set(keyInstruction, old.Instruction, nw.Instruction)
	if len(added) > 0 {
		at := place.fields[keyCron].end
		edits = append(edits, edit{span{at, at}, added})
	}
	out := d.apply(edits)
	return verified(text, out, func(a *Agents) { a.CronJobs[i] = nw })
}

// DeleteCronJob returns text without the cron job name: every "### name"
// subsection of a cron section goes, from its heading to the next heading,
// so no definition of the name is left.
func DeleteCronJob(text, name string) (string, error) {
	d := readDoc(text)
	var edits []edit
	for _, s := range d.sections {
		for _, p := range s.jobs {
			if p.name == name {
				edits = append(edits, edit{span{p.start, p.end}, nil})
			}
		}
	}
	if len(edits) == 0 {
		return "", fmt.Errorf("%w %q", ErrNoCronJob, name)
	}
	out := d.apply(edits)
	return verified(text, out, func(a *Agents) {
		a.CronJobs = slices.DeleteFunc(a.CronJobs, func(j CronJob) bool { return j.Name == name })
	})
}

// verified returns after if it parses to what change makes of before's
// parse and has no problem before did not have; else ErrUnsafeEdit. Every
// edit goes through it, so a value the checks missed can still not reach
// another key, job or section.
func verified(before, after string, change func(*Agents)) (string, error) {
	want, oldProblems := ParseAgents(before)
	want.CronJobs = slices.Clone(want.CronJobs)
	change(&want)
	got, problems := ParseAgents(after)
	if !equalAgents(want, got) || !problemsWithin(problems, oldProblems) {
		return "", ErrUnsafeEdit
	}
	return after, nil
}

func equalAgents(a, b Agents) bool {
	return slices.Equal(a.CronJobs, b.CronJobs) && maps.Equal(a.Hooks, b.Hooks) && slices.Equal(a.Webhooks, b.Webhooks)
}

// problemsWithin reports whether every problem of got is one of old, by
// message (their lines move with the edit).
func problemsWithin(got, old []Problem) bool {
	left := map[string]int{}
	for _, p := range old {
		left[p.Message]++
	}
	for _, p := range got {
		if left[p.Message] == 0 {
			return false
		}
		left[p.Message]--
	}
	return true
}

// cleanCronJob trims a new job's values and checks them (cleanValue).
func cleanCronJob(j CronJob) (CronJob, error) {
	j.Name = strings.TrimSpace(j.Name)
	if err := checkLine("name", j.Name); err != nil {
		return CronJob{}, err
	}
	for _, f := range []struct {
		key string
		v   *string
	}{
		{keyCron, &j.Cron}, {keyInstruction, &j.Instruction}, {keyChannel, &j.Channel}, {keyModel, &j.Model}, {keyTimezone, &j.Timezone},
	} {
		v, err := cleanValue(f.key, *f.v)
		if err != nil {
			return CronJob{}, err
		}
		*f.v = v
	}
	return j, nil
}

// cleanValue trims a value of key and checks it as the parser would, and
// that it can be written as agents.md lines that parse back to it.
func cleanValue(key, v string) (string, error) {
	if key == keyInstruction {
		v = normalizeInstruction(v)
		return v, checkInstruction(v)
	}
	v = strings.TrimSpace(v)
	if err := checkLine(keyNames[key], v); err != nil {
		return "", err
	}
	switch {
	case key == keyCron:
		return v, checkCron(v)
	case key == keyChannel && v != "":
		return v, checkChannel(v)
	case key == keyTimezone && v != "":
		return v, checkTimezone(v)
	}
	return v, nil
}

// normalizeInstruction makes s what the parser would read back: line
// breaks as "\n", no white space at the end of a line or around the whole.
func normalizeInstruction(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n")
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// checkLine refuses a value that cannot be written on a key's line as it
// is: a line break (it would start a line of its own, read as a key or a
// heading), another control character, invalid UTF-8, or the start of an
// HTML comment (it would hide what follows).
func checkLine(what, v string) error {
	if err := checkText(what, v, false); err != nil {
		return err
	}
	if strings.Contains(v, "<!--") {
		return commentError(what)
	}
	return nil
}

// checkText refuses invalid UTF-8 and control characters other than tabs
// and, with multiline, line breaks.
func checkText(what, v string, multiline bool) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("the %s is not valid UTF-8", what)
	}
	for _, r := range v {
		switch {
		case r == '\n' && multiline, r == '\t':
		case r == '\n' || r == '\r':
			return fmt.Errorf("the %s must be one line", what)
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("the %s has a control character", what)
		}
	}
	return nil
}

func commentError(what string) error {
	return fmt.Errorf("the %s must not contain \"<!--\" outside a code block (it would start a comment in agents.md)", what)
}

// checkInstruction refuses an instruction whose lines would not all be
// read back as its text, as the scanner reads them: "<!--" outside a code
// block, a continuation line that is a heading or a cron job key outside a
// code block, or a code block left open. Its first line follows
// "Instruction: ", so it never opens a code block.
func checkInstruction(s string) error {
	if s == "" {
		return errors.New("the Instruction is empty")
	}
	if err := checkText("Instruction", s, true); err != nil {
		return err
	}
	lines := strings.Split(s, "\n")
	if strings.Contains(lines[0], "<!--") {
		return commentError("Instruction")
	}
	var fence fenceState
	for n, l := range lines[1:] {
		if fence.step(l) {
			continue
		}
		if strings.Contains(l, "<!--") {
			return commentError("Instruction")
		}
		if level, _ := heading(l); level > 0 {
			return fmt.Errorf("line %d of the Instruction is a markdown heading, which would end the job: indent it or reword it", n+2)
		}
		if key, _, ok := keyValue(l); ok && slices.Contains(cronKeys, key) {
			return fmt.Errorf("line %d of the Instruction starts with %q, which would be read as the job's %s key: reword it", n+2, keyNames[key]+":", keyNames[key])
		}
	}
	if fence.open {
		return errors.New("the Instruction opens a code block it does not close")
	}
	return nil
}

func pausedValue(paused bool) string {
	if paused {
		return "yes"
	}
	return ""
}

// jobLines renders a new job's subsection.
func jobLines(j CronJob, eol string) []string {
	lines := []string{"### " + j.Name + eol}
	lines = append(lines, renderKey(keyCron, j.Cron, eol)...)
	for _, kv := range [][2]string{{keyTimezone, j.Timezone}, {keyChannel, j.Channel}, {keyModel, j.Model}, {keyPaused, pausedValue(j.Paused)}} {
		if kv[1] != "" {
			lines = append(lines, renderKey(kv[0], kv[1], eol)...)
		}
	}
	return append(lines, renderKey(keyInstruction, j.Instruction, eol)...)
}

// renderKey renders "Key: value"; an instruction's further lines follow as
// its continuation lines.
func renderKey(key, value, eol string) []string {
	lines := strings.Split(value, "\n")
	lines[0] = keyNames[key] + ": " + lines[0]
	for i := range lines {
		lines[i] += eol
	}
	return lines
}

// agentsDoc is agents.md cut into lines for editing, with where the parser
// finds the cron jobs. Its lines joined are the text again, byte for byte.
type agentsDoc struct {
	lines    []string // the text cut after each '\n'; the last may lack it
	eol      string   // "\r\n" when the file uses it, else "\n"
	sections []cronSection
}

// span is the lines [start, end).
type span struct{ start, end int }

// cronSection is one "## Cron Jobs" section: its heading and every line up
// to the next heading of level 1 or 2 (end).
type cronSection struct {
	span
	jobs []jobPlace
}

// jobPlace is one "### name" subsection of a cron section: its heading and
// every line up to the next heading of level 3 or less.
type jobPlace struct {
	span
	name string
	// fields are the lines of each key the job sets, as the parser reads
	// them (the first time it is set): the key's line and, for
	// Instruction, its continuation lines without the blank lines that end
	// them.
	fields map[string]span
}

// edit replaces the lines of span with lines.
type edit struct {
	span
	lines []string
}

// readDoc finds the cron sections, jobs and keys of text the way
// ParseAgents does: on scan's lines, so comments and code blocks hide
// structure here exactly as there.
func readDoc(text string) agentsDoc {
	d := agentsDoc{lines: strings.SplitAfter(text, "\n"), eol: "\n"}
	if strings.Contains(text, "\r\n") {
		d.eol = "\r\n"
	}
	scanned, _ := scan(AgentsFile, text)
	var (
		sec    *cronSection
		job    *jobPlace
		open   string // the key whose lines are being read, if it spans lines
		inItem bool   // job's keys are still read (no deeper heading yet)
	)
	closeKey := func(i int) {
		if open != "" {
			sp := job.fields[open]
			sp.end = i
			for sp.end > sp.start+1 && blank(d.lines[sp.end-1]) {
				sp.end--
			}
			job.fields[open] = sp
			open = ""
		}
	}
	closeJob := func(i int) {
		closeKey(i)
		if job != nil {
			job.end = i
			sec.jobs = append(sec.jobs, *job)
			job = nil
		}
	}
	closeSection := func(i int) {
		closeJob(i)
		if sec != nil {
			sec.end = i
			d.sections = append(d.sections, *sec)
			sec = nil
		}
	}
	for _, l := range scanned {
		i := l.num - 1
		level, name := 0, ""
		if !l.code {
			level, name = heading(l.text)
		}
		switch {
		case level == 0:
			if job == nil || !inItem || l.code {
				continue
			}
			key, _, ok := keyValue(l.text)
			if !ok || !slices.Contains(cronKeys, key) {
				continue
			}
			closeKey(i)
			if _, dup := job.fields[key]; dup {
				continue // a problem for the parser: the job does not parse
			}
			job.fields[key] = span{i, i + 1}
			if key == keyInstruction {
				open = key
			}
		case level <= 2:
			closeSection(i)
			if level == 2 && sectionName(name) == sectionCron {
				sec = &cronSection{span: span{start: i}}
			}
		case sec == nil:
		case level == 3:
			closeJob(i)
			job = &jobPlace{span: span{start: i}, name: name, fields: map[string]span{}}
			inItem = true
		default:
			closeKey(i)
			inItem = false
		}
	}
	closeSection(len(d.lines))
	return d
}

// find returns the first subsection of a cron section named name: the one
// the parser takes (of two with a name the first counts).
func (d agentsDoc) find(name string) (jobPlace, bool) {
	for _, s := range d.sections {
		for _, p := range s.jobs {
			if p.name == name {
				return p, true
			}
		}
	}
	return jobPlace{}, false
}

// apply returns the text with the edits made; they must not overlap.
func (d agentsDoc) apply(edits []edit) string {
	lines := slices.Clone(d.lines)
	// From the bottom up, so that each edit's lines are still where they
	// were found.
	// sort.SliceStable, not slices.SortFunc: each struct type given to the
	// generic sort compiles to ~12 KB of its own code.
	sort.SliceStable(edits, func(i, j int) bool {
		a, b := edits[i], edits[j]
		if a.start != b.start {
			return a.start > b.start
		}
		return a.end > b.end
	})
	for _, e := range edits {
		if e.start == e.end && e.start > 0 && lines[e.start-1] != "" && !strings.HasSuffix(lines[e.start-1], "\n") {
			lines[e.start-1] += d.eol // inserting after the file's unterminated last line
		}
		lines = slices.Replace(lines, e.start, e.end, e.lines...)
	}
	return strings.Join(lines, "")
}

// withJob returns the text with job's lines added at the end of section
// s: after its last line that is not blank, a blank line between.
func (d agentsDoc) withJob(s cronSection, job []string) string {
	at := s.end
	for at > s.start+1 && blank(d.lines[at-1]) {
		at--
	}
	add := append([]string{d.eol}, job...)
	if at < len(d.lines) && !blank(d.lines[at]) {
		add = append(add, d.eol) // the next heading followed at once
	}
	return d.apply([]edit{{span{at, at}, add}})
}

// withSection returns the text with a new "## Cron Jobs" section holding
// job's lines at its end, after a blank line.
func (d agentsDoc) withSection(job []string) string {
	text := strings.Join(d.lines, "")
	var b strings.Builder
	b.WriteString(text)
	if text != "" {
		if !strings.HasSuffix(text, "\n") {
			b.WriteString(d.eol)
		}
		if lines := strings.SplitAfter(b.String(), "\n"); !blank(lines[len(lines)-2]) {
			b.WriteString(d.eol)
		}
	}
	b.WriteString("## Cron Jobs" + d.eol + d.eol)
	b.WriteString(strings.Join(job, ""))
	return b.String()
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }
