package persona

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bootConfig builds a BootConfig the way ParseBoot fills it: every listed
// file has a default, an empty header unless given.
func bootConfig(required, optional []string, defaults map[string]string) BootConfig {
	c := BootConfig{Defaults: map[string]string{}}
	if len(required) > 0 {
		c.Required = required
	}
	if len(optional) > 0 {
		c.Optional = optional
	}
	for _, f := range append(slices.Clone(required), optional...) {
		c.Defaults[f] = emptyHeader(f)
	}
	for f, d := range defaults {
		c.Defaults[f] = d
	}
	return c
}

// formatBoot writes c in the boot.md format, each default in a fence longer
// than any backtick run in it. Instructions are left out.
func formatBoot(c BootConfig) string {
	var b strings.Builder
	b.WriteString("# Boot\n\n## Required\n")
	for _, f := range c.Required {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	b.WriteString("\n## Optional\n")
	for _, f := range c.Optional {
		fmt.Fprintf(&b, "- %s\n", f)
	}
	for _, f := range append(slices.Clone(c.Required), c.Optional...) {
		d := c.Defaults[f]
		run, longest := 0, 0
		for _, r := range d {
			if r == '`' {
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		fence := strings.Repeat("`", max(3, longest+1))
		fmt.Fprintf(&b, "\n## Default: %s\n\n%smarkdown\n%s%s\n", f, fence, d, fence)
	}
	return b.String()
}

func TestParseBoot(t *testing.T) {
	def := DefaultBoot()
	tests := []struct {
		name     string
		in       string
		want     BootConfig
		problems []Problem
	}{
		{name: "empty", in: "", want: def},
		{name: "prose only", in: "# Boot\n\nNothing here.\n", want: def},
		{
			name: "full",
			in: "# Boot\n\nIntro.\n\n## Required\n- soul.md\n- `identity.md` (who)\n\n## Optional\n* tools.md\n+ user.md:\n\n" +
				"## Default: soul.md\n\nCreated when missing:\n\n```markdown\n# Soul\n\n## Values\nBe kind.\n```\nafter the fence\n\n" +
				"## Default: identity.md\n\n# Identity\n\nName: Ferris\n\n\n" +
				"## Instructions\n\nCheck the files.\n",
			want: func() BootConfig {
				c := bootConfig([]string{"soul.md", "identity.md"}, []string{"tools.md", "user.md"}, map[string]string{
					"soul.md":     "# Soul\n\n## Values\nBe kind.\n",
					"identity.md": "# Identity\n\nName: Ferris\n",
				})
				c.Instructions = "Check the files."
				return c
			}(),
		},
		{
			name: "a missing list keeps the built-in one",
			in:   "## Required\n- soul.md\n",
			want: bootConfig([]string{"soul.md"}, def.Optional, nil),
		},
		{
			name: "an empty list replaces the built-in one",
			in:   "## Required\n\n## Optional\n",
			want: bootConfig(nil, nil, nil),
		},
		{
			name: "a default alone makes a file optional",
			in:   "## Optional\n- tools.md\n## Default: notes.md\nNotes\n",
			want: bootConfig(def.Required, []string{"tools.md", "notes.md"}, map[string]string{"notes.md": "Notes\n"}),
		},
		{
			name: "names that leave CONFIG_DIR or are not markdown",
			in: "## Required\n- ../etc/passwd\n- a/b.md\n- /abs.md\n- ..md\n- .hidden.md\n- x.txt\n- a\\b.md\n- soul.md\n" +
				"## Default: ../../x.md\nboom\n## Optional\n",
			want: bootConfig([]string{"soul.md"}, nil, nil),
			problems: []Problem{
				{2, `"../etc/passwd" is not a plain file name inside CONFIG_DIR: ignored`},
				{3, `"a/b.md" is not a plain file name inside CONFIG_DIR: ignored`},
				{4, `"/abs.md" is not a plain file name inside CONFIG_DIR: ignored`},
				{5, `"..md" is not a plain file name inside CONFIG_DIR: ignored`},
				{6, `".hidden.md" is a hidden file: ignored`},
				{7, `"x.txt" is not a markdown (.md) file: ignored`},
				{8, `"a\\b.md" is not a plain file name inside CONFIG_DIR: ignored`},
				{10, `"../../x.md" is not a plain file name inside CONFIG_DIR: default ignored`},
			},
		},
		{
			name: "duplicates, unknown sections, stray lines",
			in:   "## Required\n- soul.md\nsoul.md\n- soul.md\n## Optional\n- soul.md\n- tools.md\n## Webhooks\n- x.md\n## Default: tools.md\nA\n## Default: tools.md\nB\n## Default: user.md\n\n",
			want: bootConfig([]string{"soul.md"}, []string{"tools.md", "user.md"}, map[string]string{"tools.md": "A\n"}),
			problems: []Problem{
				{3, `not a list item ("- file.md"): ignored`},
				{4, "soul.md is already listed on line 2: ignored"},
				{6, "soul.md is already listed on line 2: ignored"},
				{8, `unknown section "Webhooks": ignored`},
				{12, "second default for tools.md: ignored"},
				{14, "default for user.md is empty: it gets an empty header"},
			},
		},
		{
			name: "headings in fences and comments do not count",
			in:   "## Required\n- soul.md\n<!--\n## Optional\n- nope.md\n-->\n## Default: soul.md\n````\n```\n## Required\n- x.md\n```\n````\n",
			want: bootConfig([]string{"soul.md"}, def.Optional, map[string]string{"soul.md": "```\n## Required\n- x.md\n```\n"}),
		},
		{
			name:     "an unclosed fence runs to the end",
			in:       "## Default: soul.md\n```\n# Soul\n## Optional\n- x.md\n",
			want:     bootConfig(def.Required, def.Optional, map[string]string{"soul.md": "# Soul\n## Optional\n- x.md\n\n"}),
			problems: []Problem{{2, "code fence is never closed: it runs to the end of boot.md"}},
		},
		{
			name: "CRLF and case",
			in:   "## REQUIRED\r\n- soul.md\r\n## optional files\r\n- tools.md\r\n## DEFAULT: `tools.md`\r\n# Tools\r\n",
			want: bootConfig([]string{"soul.md"}, []string{"tools.md"}, map[string]string{"tools.md": "# Tools\n"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems := ParseBoot(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseBoot (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.problems, problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEmptyHeader(t *testing.T) {
	for in, want := range map[string]string{
		"soul.md": "# Soul\n", "memory.md": "# Memory\n", "heartbeat.md": "# Heartbeat\n",
		"open-tasks.md": "# Open tasks\n", "ünï_x.md": "# Ünï x\n",
	} {
		if got := emptyHeader(in); got != want {
			t.Errorf("emptyHeader(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProblemString(t *testing.T) {
	if got := (Problem{Line: 3, Msg: "bad"}).String(); got != "boot.md:3: bad" {
		t.Errorf("String = %q", got)
	}
	if got := (Problem{Msg: "bad"}).String(); got != "bad" {
		t.Errorf("String = %q", got)
	}
}

func FuzzParseBoot(f *testing.F) {
	f.Add("")
	f.Add("## Required\n- soul.md\n## Default: soul.md\nx\n")
	f.Add("## Default: ../x.md\n## Optional\n- /abs.md\n- .hidden.md\n")
	f.Add("## Required\n- soul.md\n<!--\n## Optional\n- nope.md\n-->\n## Default: soul.md\n````\n```\n## Required\n```\n````\n")
	f.Add("## Default: soul.md\n```\n# Soul\n## Optional\n- x.md\n")
	f.Add("## REQUIRED\r\n- soul.md\r\n## optional files\r\n* `tools.md`\r\n## Instructions\nhi\n## Webhooks\n")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, problems := ParseBoot(s)
		lines := strings.Count(s, "\n") + 1
		for _, p := range problems {
			if p.Line < 1 || p.Line > lines || p.Msg == "" {
				t.Fatalf("problem %+v outside 1..%d", p, lines)
			}
		}
		seen := map[string]bool{}
		for _, name := range append(slices.Clone(cfg.Required), cfg.Optional...) {
			if msg := checkName(name); msg != "" {
				t.Fatalf("accepted a bad name: %s", msg)
			}
			if seen[name] {
				t.Fatalf("%q listed twice: %+v", name, cfg)
			}
			seen[name] = true
			if !strings.HasSuffix(cfg.Defaults[name], "\n") {
				t.Fatalf("%q has default %q", name, cfg.Defaults[name])
			}
		}
		if len(cfg.Defaults) != len(seen) {
			t.Fatalf("defaults for unlisted files: %+v", cfg)
		}
		// What ParseBoot read, written back in the format, reads the same.
		cfg.Instructions = ""
		again, problems := ParseBoot(formatBoot(cfg))
		if diff := cmp.Diff(cfg, again); diff != "" || len(problems) > 0 {
			t.Fatalf("format round trip (-want +got):\n%s\nproblems %v\n%s", diff, problems, formatBoot(cfg))
		}
	})
}

// Property 27: whatever boot.md lists and whichever files exist, after
// Bootstrap every listed file exists, the missing ones with their default
// content, the others untouched; a second run creates nothing.
func TestBootstrapProperty(t *testing.T) {
	t.Parallel()
	pool := []string{"soul.md", "identity.md", "agents.md", "user.md", "memory.md", "tools.md", "heartbeat.md", "notes.md", "ünï-x.md"}
	rng := rand.New(rand.NewPCG(27, 27))
	for i := 0; i < 200; i++ {
		dir := filepath.Join(t.TempDir(), "config")
		cfg := DefaultBoot()
		useBoot := rng.IntN(4) > 0
		if useBoot {
			names := slices.Clone(pool)
			rng.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
			names = names[:rng.IntN(len(names)+1)]
			split := rng.IntN(len(names) + 1)
			defaults := map[string]string{}
			for _, n := range names {
				if rng.IntN(2) == 0 {
					d := strings.ReplaceAll(strings.ToValidUTF8(randomContent(rng), "?"), "\r", "")
					defaults[n] = strings.TrimSuffix(d, "\n") + "\n"
				}
			}
			cfg = bootConfig(names[:split], names[split:], defaults)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(dir, BootFile), formatBoot(cfg))
			parsed, problems := ParseBoot(formatBoot(cfg))
			if diff := cmp.Diff(cfg, parsed); diff != "" || problems != nil {
				t.Fatalf("boot.md round trip (-want +got):\n%s\n%v", diff, problems)
			}
		}
		listed := append(slices.Clone(cfg.Required), cfg.Optional...)
		existing := map[string]bool{}
		var wantCreated, wantLoaded []string
		for _, n := range listed {
			if rng.IntN(2) == 0 {
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, n), "mine "+n)
				existing[n] = true
				wantLoaded = append(wantLoaded, n)
			} else {
				wantCreated = append(wantCreated, n)
			}
		}
		res, err := Bootstrap(dir, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		want := BootResult{Loaded: wantLoaded, Created: wantCreated, BootFile: useBoot}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Fatalf("iteration %d: Bootstrap (-want +got):\n%s", i, diff)
		}
		for _, n := range listed {
			data, err := os.ReadFile(filepath.Join(dir, n))
			wantData := cfg.Defaults[n]
			if existing[n] {
				wantData = "mine " + n
			}
			if err != nil || string(data) != wantData {
				t.Fatalf("%s = %q, %v; want %q", n, data, err, wantData)
			}
		}
		again, err := Bootstrap(dir, testLog(t))
		if err != nil || len(again.Created) != 0 || len(again.Loaded) != len(listed) {
			t.Fatalf("second Bootstrap = %+v, %v", again, err)
		}
	}
}

func TestBootstrap(t *testing.T) {
	t.Run("no dir, no boot.md", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "config")
		log, buf := captureLog(t)
		res, err := Bootstrap(dir, log)
		if err != nil {
			t.Fatal(err)
		}
		want := BootResult{Created: []string{"soul.md", "identity.md", "agents.md", "user.md", "memory.md", "tools.md", "heartbeat.md"}}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("Bootstrap (-want +got):\n%s", diff)
		}
		for f, content := range map[string]string{"soul.md": "# Soul\n", "memory.md": "# Memory\n", "heartbeat.md": "# Heartbeat\n"} {
			if data, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(data) != content {
				t.Errorf("%s = %q, %v; want %q", f, data, err, content)
			}
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("config dir mode: %v, %v", fi.Mode(), err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "user.md")); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("user.md mode: %v, %v", fi.Mode(), err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != len(want.Created) {
			t.Errorf("dir holds %d entries, want %d: temp files left?", len(entries), len(want.Created))
		}
		for _, s := range []string{"no boot.md", `"file":"soul.md"`, "required persona file was missing", "bootstrap complete"} {
			if !strings.Contains(buf.String(), s) {
				t.Errorf("log lacks %q:\n%s", s, buf)
			}
		}
	})
	t.Run("existing files are kept, odd ones reported", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, BootFile), "## Required\n- soul.md\n- ../x.md\n## Optional\n- user.md\n")
		writeFile(t, filepath.Join(dir, "soul.md"), "mine")
		if err := os.Mkdir(filepath.Join(dir, "user.md"), 0o755); err != nil {
			t.Fatal(err)
		}
		res, err := Bootstrap(dir, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		want := BootResult{Loaded: []string{"soul.md"}, BootFile: true, Problems: []Problem{
			{3, `"../x.md" is not a plain file name inside CONFIG_DIR: ignored`},
			{0, "user.md is not a regular file (d---------): left alone"},
		}}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("Bootstrap (-want +got):\n%s", diff)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "soul.md")); string(data) != "mine" {
			t.Errorf("soul.md overwritten: %q", data)
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x.md")); err == nil {
			t.Error("created a file outside CONFIG_DIR")
		}
	})
	t.Run("boot.md is a directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, BootFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Bootstrap(dir, testLog(t)); err == nil {
			t.Error("Bootstrap with a directory for boot.md succeeded")
		}
	})
	t.Run("read-only dir", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes anywhere")
		}
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		if _, err := Bootstrap(dir, testLog(t)); err == nil {
			t.Error("Bootstrap in a read-only dir succeeded")
		}
	})
}

// The shipped example persona parses cleanly, defines no scheduled work
// outside comments, and fills every section.
func TestShippedConfig(t *testing.T) {
	dir := filepath.Join("..", "..", "config")
	boot, err := os.ReadFile(filepath.Join(dir, BootFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg, problems := ParseBoot(string(boot))
	if len(problems) > 0 {
		t.Errorf("config/boot.md problems: %v", problems)
	}
	for _, f := range []string{SoulFile, IdentityFile, AgentsFile, UserFile, MemoryFile, ToolsFile, HeartbeatFile} {
		if _, ok := cfg.Defaults[f]; !ok {
			t.Errorf("config/boot.md does not list %s", f)
		}
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("config/%s: %v", f, err)
		}
	}
	if cfg.Defaults[HeartbeatFile] != emptyHeader(HeartbeatFile) && strings.Contains(cfg.Defaults[HeartbeatFile], "Interval:") {
		t.Errorf("the heartbeat.md default defines checks:\n%s", cfg.Defaults[HeartbeatFile])
	}
	for _, f := range []string{AgentsFile, HeartbeatFile} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for _, line := range strings.Split(string(data), "\n") {
			was := in
			in = updateComment(in, line)
			if was || in {
				continue
			}
			for _, key := range []string{"Cron:", "Interval:", "Instruction:"} {
				if strings.HasPrefix(line, key) {
					t.Errorf("config/%s defines scheduled work outside a comment: %q", f, line)
				}
			}
		}
	}
	files, err := Load(dir, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	var all []string
	for _, s := range Sections {
		all = append(all, s.Name)
	}
	if diff := cmp.Diff(all, SectionNames(Assemble(files, filepath.Join(dir, MemoryFile)))); diff != "" {
		t.Errorf("shipped persona sections (-want +got):\n%s", diff)
	}
}
