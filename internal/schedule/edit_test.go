package schedule

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func ptr[T any](v T) *T { return &v }

const editBase = "# Rules\n\nBe nice.\n\n## Cron Jobs\n\nJobs run unattended.\n\n### daily\ncron:  0 9 * * *\nInstruction: Say hi.\n  Then list the tasks.\n\n### weekly <!-- since May -->\nCron: 0 8 * * 1\nChannel: 123456789012345678\nInstruction: Report.\n\n## Hooks\n\n### startup\nInstruction: Hello.\n"

var addTests = []struct {
	name string
	text string
	job  CronJob
	want string
}{
	{
		name: "at the end of the section, before the next one",
		text: editBase,
		job:  CronJob{Name: "nightly", Cron: "0 2 * * *", Instruction: "Clean up."},
		want: strings.Replace(editBase, "Instruction: Report.\n\n## Hooks",
			"Instruction: Report.\n\n### nightly\nCron: 0 2 * * *\nInstruction: Clean up.\n\n## Hooks", 1),
	},
	{
		name: "every field, trimmed; a multi-line instruction",
		text: "## Cron Jobs\n",
		job: CronJob{Name: " full ", Cron: " @daily ", Timezone: "Europe/Berlin", Channel: "42", Model: "haiku", Paused: true,
			Instruction: "  Look at the inbox.  \r\n```\n## not a heading\nCron: not a key\n```\n  Keep it short.\n\n"},
		want: "## Cron Jobs\n\n### full\nCron: @daily\nTimezone: Europe/Berlin\nChannel: 42\nModel: haiku\nPaused: yes\nInstruction: Look at the inbox.\n```\n## not a heading\nCron: not a key\n```\n  Keep it short.\n",
	},
	{
		name: "a new section at the end when there is none",
		text: "# Rules\n\nBe nice.\n",
		job:  CronJob{Name: "a", Cron: "0 9 * * *", Instruction: "A."},
		want: "# Rules\n\nBe nice.\n\n## Cron Jobs\n\n### a\nCron: 0 9 * * *\nInstruction: A.\n",
	},
	{
		name: "the section in a comment does not count; a missing last line break is added",
		text: "# Rules\n<!--\n## Cron Jobs\n### x\nCron: 0 9 * * *\nInstruction: x\n-->",
		job:  CronJob{Name: "a", Cron: "0 9 * * *", Instruction: "A."},
		want: "# Rules\n<!--\n## Cron Jobs\n### x\nCron: 0 9 * * *\nInstruction: x\n-->\n\n## Cron Jobs\n\n### a\nCron: 0 9 * * *\nInstruction: A.\n",
	},
	{
		name: "an empty file",
		job:  CronJob{Name: "a", Cron: "0 9 * * *", Instruction: "A."},
		want: "## Cron Jobs\n\n### a\nCron: 0 9 * * *\nInstruction: A.\n",
	},
	{
		name: "the last of two cron sections; a heading right after gets a blank line",
		text: "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\n## Style\n## cron jobs\n### b\nCron: 0 2 * * *\nInstruction: B.\n## Hooks\n",
		job:  CronJob{Name: "c", Cron: "0 3 * * *", Instruction: "C."},
		want: "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\n## Style\n## cron jobs\n### b\nCron: 0 2 * * *\nInstruction: B.\n\n### c\nCron: 0 3 * * *\nInstruction: C.\n\n## Hooks\n",
	},
	{
		name: "CRLF files get CRLF lines",
		text: "## Cron Jobs\r\n\r\n### a\r\nCron: 0 1 * * *\r\nInstruction: A.\r\n",
		job:  CronJob{Name: "b", Cron: "0 2 * * *", Instruction: "B.\nMore."},
		want: "## Cron Jobs\r\n\r\n### a\r\nCron: 0 1 * * *\r\nInstruction: A.\r\n\r\n### b\r\nCron: 0 2 * * *\r\nInstruction: B.\r\nMore.\r\n",
	},
}

func TestAddCronJob(t *testing.T) {
	t.Parallel()
	for _, tt := range addTests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := AddCronJob(tt.text, tt.job)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("AddCronJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAddCronJobRefuses(t *testing.T) {
	t.Parallel()
	ok := CronJob{Name: "new", Cron: "0 9 * * *", Instruction: "Do it."}
	with := func(f func(*CronJob)) CronJob { j := ok; f(&j); return j }
	tests := []struct {
		name string
		text string
		job  CronJob
		is   error  // the error it wraps, if any
		has  string // a fragment of its message
	}{
		{name: "a taken name", job: with(func(j *CronJob) { j.Name = "daily" }), is: ErrCronJobExists},
		{name: "a taken name in another case", text: "## Cron Jobs\n### Daily\nCron: x\n", job: with(func(j *CronJob) { j.Name = "daily" }), is: ErrCronJobExists},
		{name: "a name with spaces", job: with(func(j *CronJob) { j.Name = "Weekly Report" }), has: "not 1 to 64 of a-z"},
		{name: "an empty name", job: with(func(j *CronJob) { j.Name = " " }), has: "not 1 to 64"},
		{name: "an invalid cron", job: with(func(j *CronJob) { j.Cron = "61 * * * *" }), has: `the Cron "61 * * * *" is invalid`},
		{name: "a channel name", job: with(func(j *CronJob) { j.Channel = "#general" }), has: "not a Discord channel id"},
		{name: "an unknown zone", job: with(func(j *CronJob) { j.Timezone = "Mars/Olympus" }), has: "not a known IANA time zone"},
		{name: "an empty instruction", job: with(func(j *CronJob) { j.Instruction = " \n " }), has: "Instruction is empty"},
		{name: "a line break in the name", job: with(func(j *CronJob) { j.Name = "a\n## Hooks" }), has: "name must be one line"},
		{name: "a line break in the cron", job: with(func(j *CronJob) { j.Cron = "0 9 * * *\nChannel: 1" }), has: "Cron must be one line"},
		{name: "a line break in the channel", job: with(func(j *CronJob) { j.Channel = "1\r2" }), has: "Channel must be one line"},
		{name: "a line break in the model", job: with(func(j *CronJob) { j.Model = "opus\nPaused: yes" }), has: "Model must be one line"},
		{name: "a control character", job: with(func(j *CronJob) { j.Model = "op\x00us" }), has: "control character"},
		{name: "invalid UTF-8", job: with(func(j *CronJob) { j.Instruction = "a\xffb" }), has: "not valid UTF-8"},
		{name: "a comment in the model", job: with(func(j *CronJob) { j.Model = "opus <!--" }), has: `"<!--"`},
		{name: "a comment in the instruction", job: with(func(j *CronJob) { j.Instruction = "Hi <!-- and the rest" }), has: `"<!--"`},
		{name: "a comment on a later line", job: with(func(j *CronJob) { j.Instruction = "Hi\n<!--" }), has: `"<!--"`},
		{name: "a heading in the instruction", job: with(func(j *CronJob) { j.Instruction = "Hi.\n### evil\nCron: * * * * *" }), has: "line 2 of the Instruction is a markdown heading"},
		{name: "a section in the instruction", job: with(func(j *CronJob) { j.Instruction = "Hi.\n## Hooks" }), has: "markdown heading"},
		{name: "a key in the instruction", job: with(func(j *CronJob) { j.Instruction = "Hi.\n  channel: 1" }), has: `line 2 of the Instruction starts with "Channel:"`},
		{name: "an open code block", job: with(func(j *CronJob) { j.Instruction = "Hi.\n```\n### evil" }), has: "does not close"},
		{name: "an unclosed comment hides the end of the file", text: "# Rules\n<!-- draft\n", job: ok, is: ErrUnsafeEdit},
		{name: "an unclosed code block hides the end of the section", text: "## Cron Jobs\n```\n", job: ok, is: ErrUnsafeEdit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := tt.text
			if text == "" {
				text = editBase
			}
			got, err := AddCronJob(text, tt.job)
			if err == nil {
				t.Fatalf("AddCronJob = nil error, text:\n%s", got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q, want one wrapping %q", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %q does not say %q", err, tt.has)
			}
		})
	}
}

func TestUpdateCronJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		text   string
		job    string
		change CronChange
		want   string
	}{
		{
			name:   "only the given key's line changes",
			job:    "daily",
			change: CronChange{Cron: ptr("30 9 * * 1-5")},
			want:   strings.Replace(editBase, "cron:  0 9 * * *", "Cron: 30 9 * * 1-5", 1),
		},
		{
			name:   "a new key goes after the Cron line",
			job:    "daily",
			change: CronChange{Model: ptr("haiku"), Channel: ptr("77")},
			want:   strings.Replace(editBase, "cron:  0 9 * * *\n", "cron:  0 9 * * *\nChannel: 77\nModel: haiku\n", 1),
		},
		{
			name:   "an empty channel removes the key",
			job:    "weekly",
			change: CronChange{Channel: ptr("")},
			want:   strings.Replace(editBase, "Channel: 123456789012345678\n", "", 1),
		},
		{
			name:   "a multi-line instruction is replaced whole; the blank line after it stays",
			job:    "daily",
			change: CronChange{Instruction: ptr("Say good morning.")},
			want:   strings.Replace(editBase, "Instruction: Say hi.\n  Then list the tasks.\n", "Instruction: Say good morning.\n", 1),
		},
		{
			name:   "pause",
			job:    "weekly",
			change: CronChange{Paused: ptr(true)},
			want:   strings.Replace(editBase, "Cron: 0 8 * * 1\n", "Cron: 0 8 * * 1\nPaused: yes\n", 1),
		},
		{
			name:   "resume removes the key",
			text:   "## Cron Jobs\n### a\nPaused: YES\nCron: 0 1 * * *\nInstruction: A.",
			job:    "a",
			change: CronChange{Paused: ptr(false)},
			want:   "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.",
		},
		{
			name:   "pausing over Paused: no replaces it",
			text:   "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\nPaused: no\n",
			job:    "a",
			change: CronChange{Paused: ptr(true)},
			want:   "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\nPaused: yes\n",
		},
		{
			name:   "a key added after a last line without a line break",
			text:   "## Cron Jobs\n### a\nInstruction: A.\nCron: 0 1 * * *",
			job:    "a",
			change: CronChange{Model: ptr("opus")},
			want:   "## Cron Jobs\n### a\nInstruction: A.\nCron: 0 1 * * *\nModel: opus\n",
		},
		{
			name:   "nothing changes when the values are the same",
			job:    "weekly",
			change: CronChange{Cron: ptr(" 0 8 * * 1 "), Paused: ptr(false), Model: ptr("")},
			want:   editBase,
		},
		{
			name:   "a job holding a comment in a code block keeps it",
			text:   "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\n```\n<!-- kept -->\n```\n",
			job:    "a",
			change: CronChange{Cron: ptr("0 2 * * *")},
			want:   "## Cron Jobs\n### a\nCron: 0 2 * * *\nInstruction: A.\n```\n<!-- kept -->\n```\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := tt.text
			if text == "" {
				text = editBase
			}
			got, err := UpdateCronJob(text, tt.job, tt.change)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UpdateCronJob (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUpdateCronJobRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		text   string
		job    string
		change CronChange
		is     error
		has    string
	}{
		{name: "an unknown job", job: "hourly", change: CronChange{Paused: ptr(true)}, is: ErrNoCronJob, has: `no cron job "hourly"`},
		{name: "a job in a comment", text: "## Cron Jobs\n<!--\n### a\nCron: 0 1 * * *\nInstruction: A.\n-->\n", job: "a", change: CronChange{Paused: ptr(true)}, is: ErrNoCronJob},
		{name: "a job that does not parse", text: "## Cron Jobs\n### a\nCron: 61 * * * *\nInstruction: A.\n", job: "a", change: CronChange{Model: ptr("x")}, is: ErrInvalidCronJob},
		{name: "an invalid cron", job: "daily", change: CronChange{Cron: ptr("* * *")}, has: "has 3 fields"},
		{name: "an empty instruction", job: "daily", change: CronChange{Instruction: ptr("")}, has: "Instruction is empty"},
		{name: "a key smuggled into the prompt", job: "daily", change: CronChange{Instruction: ptr("Hi.\nPaused: yes")}, has: `"Paused:"`},
		{name: "a line break in the model", job: "daily", change: CronChange{Model: ptr("a\nb")}, has: "Model must be one line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := tt.text
			if text == "" {
				text = editBase
			}
			got, err := UpdateCronJob(text, tt.job, tt.change)
			if err == nil {
				t.Fatalf("UpdateCronJob = nil error, text:\n%s", got)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q, want one wrapping %q", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.has) {
				t.Errorf("error %q does not say %q", err, tt.has)
			}
		})
	}
}

func TestDeleteCronJob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		job  string
		want string
	}{
		{
			name: "a job between others",
			job:  "daily",
			want: strings.Replace(editBase, "### daily\ncron:  0 9 * * *\nInstruction: Say hi.\n  Then list the tasks.\n\n", "", 1),
		},
		{
			name: "the last job of the section",
			job:  "weekly",
			want: strings.Replace(editBase, "### weekly <!-- since May -->\nCron: 0 8 * * 1\nChannel: 123456789012345678\nInstruction: Report.\n\n", "", 1),
		},
		{
			name: "every definition of the name, and one that does not parse",
			text: "## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A.\n### b\nCron: 0 2 * * *\nInstruction: B.\n### a\nCron: bad\n#### notes\ntext\n",
			job:  "a",
			want: "## Cron Jobs\n### b\nCron: 0 2 * * *\nInstruction: B.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			text := tt.text
			if text == "" {
				text = editBase
			}
			got, err := DeleteCronJob(text, tt.job)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DeleteCronJob (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := DeleteCronJob(editBase, "startup"); !errors.Is(err, ErrNoCronJob) {
		t.Errorf("deleting a hook: error %v, want ErrNoCronJob", err)
	}
}

// jobBytes returns the byte range of the first and last cron subsections
// named name in text: an edit of that job may change these bytes only.
func jobBytes(text, name string) (start, end int, ok bool) {
	d := readDoc(text)
	offset := func(line int) int { return len(strings.Join(d.lines[:line], "")) }
	first := true
	for _, s := range d.sections {
		for _, p := range s.jobs {
			if p.name != name {
				continue
			}
			if first {
				start, first = offset(p.start), false
			}
			end = offset(p.end)
		}
	}
	return start, end, !first
}

// checkOnly fails unless after is before with only before[start:end]
// replaced.
func checkOnly(t *testing.T, before, after string, start, end int) {
	t.Helper()
	if !strings.HasPrefix(after, before[:start]) || !strings.HasSuffix(after, before[end:]) || len(after) < start+len(before)-end {
		t.Fatalf("bytes outside [%d, %d) changed:\nbefore:\n%q\nafter:\n%q", start, end, before, after)
	}
}

// checkInserted fails unless after is before with something inserted at
// one place.
func checkInserted(t *testing.T, before, after string) {
	t.Helper()
	p := 0
	for p < len(before) && p < len(after) && before[p] == after[p] {
		p++
	}
	checkOnly(t, before, after, p, p)
}

// Property: random valid agents.md files (decoys, comments, code blocks,
// multi-line instructions, keys in any order and case) take a random run
// of edits: each succeeds, parses back to exactly the intended schedule
// with no problem, and leaves every byte outside the job it edits as it
// was.
func TestPropertyCronEdits(t *testing.T) {
	t.Parallel()
	forEachSeed(t, func(t *testing.T, r *rand.Rand) {
		model := randAgents(r)
		text, _ := renderAgents(r, model)
		if r.IntN(4) == 0 {
			text = strings.ReplaceAll(text, "\n", "\r\n")
		}
		for step := 0; step < 8; step++ {
			var (
				out string
				err error
				op  string
			)
			before := text
			n := len(model.CronJobs)
			switch k := r.IntN(4); {
			case k == 0 || n == 0:
				op = "add"
				j := CronJob{Name: newJobName(r, model.CronJobs), Cron: randCron(r), Instruction: randInstruction(r),
					Channel: randChannel(r), Model: randModel(r), Timezone: pick(r, zones...), Paused: r.IntN(3) == 0}
				out, err = AddCronJob(text, j)
				model.CronJobs = append(model.CronJobs, j)
			case k == 1:
				op = "delete"
				i := r.IntN(n)
				name := model.CronJobs[i].Name
				start, end, _ := jobBytes(text, name)
				out, err = DeleteCronJob(text, name)
				if err == nil {
					checkOnly(t, before, out, start, end)
				}
				model.CronJobs = slices.Delete(model.CronJobs, i, i+1)
			default:
				op = "update"
				i := r.IntN(n)
				j := &model.CronJobs[i]
				var c CronChange
				if r.IntN(2) == 0 {
					c.Cron = ptr(randCron(r))
					j.Cron = *c.Cron
				}
				if r.IntN(2) == 0 {
					c.Instruction = ptr(randInstruction(r))
					j.Instruction = *c.Instruction
				}
				if r.IntN(3) == 0 {
					c.Channel = ptr(randChannel(r))
					j.Channel = *c.Channel
				}
				if r.IntN(3) == 0 {
					c.Model = ptr(randModel(r))
					j.Model = *c.Model
				}
				if r.IntN(2) == 0 {
					c.Paused = ptr(!j.Paused)
					j.Paused = *c.Paused
				}
				start, end, _ := jobBytes(text, j.Name)
				out, err = UpdateCronJob(text, j.Name, c)
				if err == nil {
					checkOnly(t, before, out, start, end)
				}
			}
			if err != nil {
				t.Fatalf("step %d, %s: %v\ntext:\n%s", step, op, err, before)
			}
			if op == "add" {
				checkInserted(t, before, out)
			}
			got, problems := ParseAgents(out)
			if len(problems) > 0 {
				t.Fatalf("step %d, %s: problems:\n%s\ntext:\n%s", step, op, problemList(problems), out)
			}
			if diff := cmp.Diff(model, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("step %d, %s: parsed (-want +got):\n%s\ntext:\n%s", step, op, diff, out)
			}
			text = out
		}
	})
}

// newJobName returns a name AddCronJob accepts that no job has in any
// case.
func newJobName(r *rand.Rand, jobs []CronJob) string {
	for {
		name := randWord(r, nameChars, 1, 12)
		if !slices.ContainsFunc(jobs, func(j CronJob) bool { return strings.EqualFold(j.Name, name) }) {
			return name
		}
	}
}

func FuzzEditAgents(f *testing.F) {
	for _, tt := range agentsTests {
		f.Add(tt.text, uint8(0), "x", "Do it.")
	}
	for _, tt := range addTests {
		f.Add(tt.text, uint8(1), tt.job.Name, tt.job.Instruction)
	}
	f.Add(editBase, uint8(2), "daily", "Hi.\n```\nCron: 1\n```")
	f.Add(editBase, uint8(3), "weekly", "")
	f.Add(editBase, uint8(4), "daily", "")
	f.Add("## Cron Jobs\r\n### a\r\nCron: 0 1 * * *\r\nInstruction: A.", uint8(5), "a", "42")
	f.Add("## Cron Jobs\n### a\nCron: 0 1 * * *\nInstruction: A <!--\n-->\n### b\n", uint8(6), "a", "B.")
	f.Fuzz(func(t *testing.T, text string, op uint8, name, value string) {
		before, oldProblems := ParseAgents(text)
		// Edits of existing jobs mostly pick one, so they get past lookup.
		if len(before.CronJobs) > 0 && op&0x80 == 0 {
			name = before.CronJobs[int(op>>3)%len(before.CronJobs)].Name
		}
		want := before
		want.CronJobs = slices.Clone(before.CronJobs)
		var (
			out string
			err error
		)
		i := slices.IndexFunc(before.CronJobs, func(j CronJob) bool { return j.Name == name })
		start, end, found := jobBytes(text, name)
		switch op % 7 {
		case 0, 1:
			j := CronJob{Name: name, Cron: pick(rand.New(rand.NewPCG(uint64(op), 0)), "0 9 * * *", "@hourly", "*/5 * * * 1-5"), Instruction: value}
			out, err = AddCronJob(text, j)
			if err == nil {
				checkInserted(t, text, out)
				j, _ = cleanCronJob(j)
				want.CronJobs = append(want.CronJobs, j)
			}
		case 2:
			out, err = UpdateCronJob(text, name, CronChange{Instruction: &value})
			if err == nil {
				want.CronJobs[i].Instruction = normalizeInstruction(value)
			}
		case 3:
			out, err = UpdateCronJob(text, name, CronChange{Cron: &value})
			if err == nil {
				want.CronJobs[i].Cron = strings.TrimSpace(value)
			}
		case 4:
			out, err = DeleteCronJob(text, name)
			if err == nil {
				want.CronJobs = slices.DeleteFunc(want.CronJobs, func(j CronJob) bool { return j.Name == name })
			}
		case 5:
			out, err = UpdateCronJob(text, name, CronChange{Channel: &value, Model: &value})
			if err == nil {
				v := strings.TrimSpace(value)
				want.CronJobs[i].Channel, want.CronJobs[i].Model = v, v
			}
		case 6:
			p := len(value)%2 == 0
			out, err = UpdateCronJob(text, name, CronChange{Paused: &p})
			if err == nil {
				want.CronJobs[i].Paused = p
			}
		}
		if err != nil {
			return
		}
		if op%7 >= 2 {
			if !found {
				t.Fatalf("edited %q, which has no subsection", name)
			}
			checkOnly(t, text, out, start, end)
		}
		got, problems := ParseAgents(out)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("parsed after the edit (-want +got):\n%s", diff)
		}
		if !problemsWithin(problems, oldProblems) {
			t.Errorf("the edit added problems:\n%s", problemList(problems))
		}
	})
}
