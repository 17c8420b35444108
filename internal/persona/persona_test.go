package persona

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

func testLog(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

func randomContent(rng *rand.Rand) string {
	parts := []string{"", "  \n", "# Title\n", "plain text", "## Nested heading\nbody", "```go\n## not a section\n```", "- fact\n- fact\n", "ünïcødé ✓", "\n\n"}
	var b strings.Builder
	for i := rng.IntN(4); i >= 0; i-- {
		b.WriteString(parts[rng.IntN(len(parts))])
		b.WriteString("\n")
	}
	return b.String()
}

func presentNames(f Files) []string {
	var names []string
	for _, s := range Sections {
		if strings.TrimSpace(f[s.Name]) != "" {
			names = append(names, s.Name)
		}
	}
	return names
}

// Properties 19, 20 and 21: preamble first, non-empty sections in order
// with their headers, empty ones omitted, and the headers parse back to
// exactly the present sections.
func TestAssembleProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for i := 0; i < 500; i++ {
		f := Files{}
		for _, s := range Sections {
			if rng.IntN(3) > 0 {
				f[s.Name] = randomContent(rng)
			}
		}
		prompt := Assemble(f, "/cfg/memory.md")
		if !strings.HasPrefix(prompt, "You are running behind a chat gateway") || !strings.Contains(prompt, "/cfg/memory.md") || !strings.Contains(prompt, "Write") {
			t.Fatalf("preamble missing:\n%s", prompt)
		}
		want := presentNames(f)
		if diff := cmp.Diff(want, SectionNames(prompt)); diff != "" {
			t.Fatalf("section names (-want +got):\n%s\nprompt:\n%s", diff, prompt)
		}
		for _, name := range want {
			header := "## " + name + "\n\n"
			at := strings.Index(prompt, header)
			if at < 0 {
				t.Fatalf("no %q header", header)
			}
		}
	}
}

func FuzzAssembleRoundTrip(f *testing.F) {
	f.Add("# Identity", "## Soul\nx", "", "rules\n## Cron Jobs", "user", "# Memory\n- a", "```\n## x\n```")
	f.Add("", "", "", "", "", "", "")
	f.Add("\xff\xfe", "##", "## ", "##\t", "\r\n## a\r\n", " ## b", "x")
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g, h string) {
		files := Files{}
		for i, content := range []string{a, b, c, d, e, g} {
			files[Sections[i].Name] = strings.ToValidUTF8(content+h[:0], "?")
		}
		prompt := Assemble(files, "/m.md")
		if diff := cmp.Diff(presentNames(files), SectionNames(prompt)); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}

// Property 28: the markdown files are the whole state: reading again (as
// after a restart) gives the same prompt.
func TestReloadGivesSamePrompt(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for i := 0; i < 50; i++ {
		dir := t.TempDir()
		for _, s := range Sections {
			if rng.IntN(4) > 0 {
				os.WriteFile(filepath.Join(dir, s.File), []byte(randomContent(rng)), 0o644)
			}
		}
		first, err := Load(dir, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Load(dir, testLog(t))
		if Assemble(first, "m") != Assemble(again, "m") {
			t.Fatal("a second read assembled a different prompt")
		}
	}
}

func TestLoadEdgeCases(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "identity.md"), []byte("\uFEFF# Identity\nName: Bot\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "soul.md"), []byte("bad \xff byte"), 0o644)
	os.Mkdir(filepath.Join(dir, "user.md"), 0o755) // unreadable as a file
	os.WriteFile(filepath.Join(dir, "tools.md"), []byte(strings.Repeat("x", MaxFileSize+100)), 0o644)
	f, err := Load(dir, testLog(t))
	if err != nil {
		t.Fatal(err)
	}
	if f["Identity"] != "# Identity\nName: Bot\n" {
		t.Errorf("BOM not stripped: %q", f["Identity"])
	}
	if f["Personality"] != "bad \uFFFD byte" {
		t.Errorf("invalid UTF-8 not repaired: %q", f["Personality"])
	}
	if _, ok := f["User Context"]; ok {
		t.Error("a directory named user.md became a section")
	}
	if len(f["Tool Configuration"]) != MaxFileSize {
		t.Errorf("tools.md not cut: %d bytes", len(f["Tool Configuration"]))
	}
	if _, ok := f["Operating Rules"]; ok {
		t.Error("missing agents.md became a section")
	}
	data, err := os.ReadFile(filepath.Join(dir, MemoryFile))
	if err != nil || string(data) != "# Memory\n" || f["Long-Term Memory"] != "# Memory\n" {
		t.Errorf("memory.md = %q, %v", data, err)
	}
}

func TestChanges(t *testing.T) {
	f := Files{"Identity": "id", "Long-Term Memory": "# Memory\n- a\n"}
	if note, _ := Changes(f.Hashes(), f); note != "" {
		t.Errorf("unchanged persona gave a note: %q", note)
	}
	g := Files{"Identity": "id", "Long-Term Memory": "# Memory\n- a\n- b\n", "Tool Configuration": "tools"}
	note, changed := Changes(f.Hashes(), g)
	if diff := cmp.Diff([]string{"Long-Term Memory", "Tool Configuration"}, changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if !strings.Contains(note, "- b") || strings.Contains(note, "## Identity") {
		t.Errorf("note = %q", note)
	}
	note, changed = Changes(g.Hashes(), Files{"Identity": "id"})
	if !strings.Contains(note, "Removed sections") || len(changed) != 2 {
		t.Errorf("removal note = %q, changed %v", note, changed)
	}
	if note, _ := Changes(nil, f); !strings.Contains(note, "## Identity") {
		t.Errorf("unknown history should send every section: %q", note)
	}
}

// Property 27: every listed file missing from CONFIG_DIR is created with its
// default; existing files are untouched.
func TestBootstrapCreatesMissingFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	for i := 0; i < 40; i++ {
		dir := filepath.Join(t.TempDir(), "config")
		boot := DefaultBoot()
		if rng.IntN(2) == 0 {
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, BootFile), []byte("## Required\n- soul.md\n- extra.md\n## Optional\n- memory.md\n## Default: soul.md\n# Soul\n## Values\nBe kind.\n"), 0o644)
			boot, _ = ParseBoot("## Required\n- soul.md\n- extra.md\n## Optional\n- memory.md\n## Default: soul.md\n# Soul\n## Values\nBe kind.\n")
		}
		existing := map[string]bool{}
		for _, name := range append(boot.Required, boot.Optional...) {
			if rng.IntN(2) == 0 {
				os.MkdirAll(dir, 0o755)
				os.WriteFile(filepath.Join(dir, name), []byte("mine"), 0o644)
				existing[name] = true
			}
		}
		res, err := Bootstrap(dir, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range append(boot.Required, boot.Optional...) {
			data, err := os.ReadFile(filepath.Join(dir, name))
			want := boot.Defaults[name]
			if existing[name] {
				want = "mine"
			}
			if err != nil || string(data) != want {
				t.Fatalf("%s = %q, %v; want %q", name, data, err, want)
			}
		}
		if len(res.Created)+len(res.Loaded) != len(boot.Required)+len(boot.Optional) {
			t.Fatalf("result %+v does not account for every file", res)
		}
	}
}

func TestParseBoot(t *testing.T) {
	cfg, problems := ParseBoot("# Boot\n## Required\n- soul.md\n- ../etc/passwd\n- `identity.md`\n## Optional\n* tools.md\n## Default: soul.md\n# Soul\n\n## Values\nHonest.\n## Default: notes.md\nNotes\n")
	want := BootConfig{
		Required: []string{"soul.md", "identity.md"},
		Optional: []string{"tools.md", "notes.md"},
		Defaults: map[string]string{"soul.md": "# Soul\n\n## Values\nHonest.\n", "notes.md": "Notes\n", "identity.md": "# identity\n", "tools.md": "# tools\n"},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("ParseBoot (-want +got):\n%s", diff)
	}
	if len(problems) != 1 || problems[0].Line != 4 {
		t.Errorf("problems = %v, want the ../etc/passwd line", problems)
	}
}

func FuzzParseBoot(f *testing.F) {
	f.Add("## Required\n- soul.md\n## Default: soul.md\nx\n")
	f.Add("## Default: ../x.md\n## Optional\n- /abs.md\n- .hidden.md\n")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, _ := ParseBoot(s)
		for _, name := range append(cfg.Required, cfg.Optional...) {
			if checkName(name) != "" {
				t.Fatalf("accepted bad name %q", name)
			}
			if _, ok := cfg.Defaults[name]; !ok {
				t.Fatalf("%q has no default", name)
			}
		}
	})
}

// DESIGN decision 4, as a property: runs that start from the same memory and
// each rewrite the whole file with one new fact, in any interleaving of
// writes, observations and ends, leave every fact.
func TestMemoryGuardKeepsEveryFact(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for iter := 0; iter < 300; iter++ {
		path := filepath.Join(t.TempDir(), MemoryFile)
		os.WriteFile(path, []byte("# Memory\n- base fact\n"), 0o644)
		g := NewMemoryGuard(path)
		n := 2 + rng.IntN(3)
		runs := make([]*MemoryRun, n)
		bases := make([]string, n)
		for i := range runs {
			runs[i] = g.Begin()
			data, _ := os.ReadFile(path)
			bases[i] = string(data)
		}
		// Each run: write (overwrite from its base), maybe observe, end.
		type step struct{ run, kind int }
		var steps []step
		for i := 0; i < n; i++ {
			steps = append(steps, step{i, 0}, step{i, 1}, step{i, 2})
		}
		rng.Shuffle(len(steps), func(a, b int) { steps[a], steps[b] = steps[b], steps[a] })
		// keep each run's own order write < observe < end
		next := make([]int, n)
		for len(steps) > 0 {
			for k, s := range steps {
				if s.kind != next[s.run] {
					continue
				}
				switch s.kind {
				case 0:
					// The runtime observes right after each tool result.
					os.WriteFile(path, []byte(bases[s.run]+fmt.Sprintf("- fact %d\n", s.run)), 0o644)
					runs[s.run].Observe()
				case 1:
					if rng.IntN(2) == 0 {
						runs[s.run].Observe()
					}
				case 2:
					runs[s.run].End()
				}
				next[s.run]++
				steps = append(steps[:k], steps[k+1:]...)
				break
			}
		}
		data, _ := os.ReadFile(path)
		for i := 0; i < n; i++ {
			if !strings.Contains(string(data), fmt.Sprintf("- fact %d\n", i)) {
				t.Fatalf("iteration %d: fact %d lost:\n%s", iter, i, data)
			}
		}
		if !strings.Contains(string(data), "- base fact") {
			t.Fatalf("base fact lost:\n%s", data)
		}
	}
}

func TestMemoryGuardKeepsDeletionsAndHumanEdits(t *testing.T) {
	path := filepath.Join(t.TempDir(), MemoryFile)
	os.WriteFile(path, []byte("# Memory\n- old\n- keep\n"), 0o644)
	g := NewMemoryGuard(path)
	a := g.Begin()
	os.WriteFile(path, []byte("# Memory\n- keep\n"), 0o644) // the agent deletes "- old"
	a.End()
	b := g.Begin()
	b.End()
	os.WriteFile(path, []byte("# Memory\n- keep\n- added by a human\n"), 0o644)
	c := g.Begin()
	c.End()
	data, _ := os.ReadFile(path)
	if string(data) != "# Memory\n- keep\n- added by a human\n" {
		t.Errorf("memory.md = %q", data)
	}
}

func TestMemoryGuardConcurrentUse(t *testing.T) {
	path := filepath.Join(t.TempDir(), MemoryFile)
	os.WriteFile(path, []byte("# Memory\n"), 0o644)
	g := NewMemoryGuard(path)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := g.Begin()
			r.Observe()
			r.End()
		}()
	}
	wg.Wait()
}

func BenchmarkAssemble(b *testing.B) {
	f := Files{}
	for _, s := range Sections {
		f[s.Name] = strings.Repeat("Some persona text, a line of it.\n## A heading\n", 4096/48)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		Assemble(f, "/config/memory.md")
	}
}
