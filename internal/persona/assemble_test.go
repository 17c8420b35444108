package persona

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

const testMemoryPath = "/cfg/memory.md"

var testPreamble = strings.Replace(preambleText, "%MEMORY%", testMemoryPath, 1) + "\n\n"

func TestAssemble(t *testing.T) {
	tests := []struct {
		name  string
		files Files
		want  string
	}{
		{
			name:  "nothing",
			files: Files{},
			want:  testPreamble,
		},
		{
			name: "order, labels, omissions",
			files: Files{
				"Tool Configuration": "tools\n",
				"Long-Term Memory":   "# Memory\n- likes tea\n",
				"User Context":       " \n\t\n",
				"Identity":           "# Identity\nName: Ferris\n",
				"Personality":        "",
			},
			want: testPreamble +
				"## Identity\n\n# Identity\nName: Ferris\n\n" +
				"## Long-Term Memory\n\n# Memory\n- likes tea\n\n" +
				"## Tool Configuration\n\ntools\n\n",
		},
		{
			name:  "nested headings are demoted outside code fences",
			files: Files{"Operating Rules": "\n\nBe nice.\n## Cron Jobs\n### morning\nCron: 0 9 * * *\n```md\n## kept as is\n```\n## Hooks   \n\n"},
			want: testPreamble +
				"## Operating Rules\n\nBe nice.\n### Cron Jobs\n#### morning\nCron: 0 9 * * *\n```md\n## kept as is\n```\n### Hooks\n\n",
		},
		{
			name:  "an unclosed fence is closed at the end of its section",
			files: Files{"Identity": "````\n## in code", "Personality": "## Soul"},
			want:  testPreamble + "## Identity\n\n````\n## in code\n````\n\n## Personality\n\n### Soul\n\n",
		},
		{
			name:  "invalid UTF-8",
			files: Files{"Identity": "a\xffb"},
			want:  testPreamble + "## Identity\n\na\uFFFDb\n\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Assemble(tt.files, testMemoryPath)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Assemble (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAssembleMakesMemoryPathAbsolute(t *testing.T) {
	got := Assemble(Files{}, "config/memory.md")
	abs, err := filepath.Abs("config/memory.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, " "+abs+" ") {
		t.Errorf("preamble does not name %s:\n%s", abs, got)
	}
}

func TestSectionBody(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"## X", "### X"},
		{"   ## X", "   ### X"},
		{"    ## X", "    ## X"}, // indented code
		{"##X", "##X"},
		{"##", "###"},
		{"##\tX", "###\tX"},
		{"## X\r\nY", "### X\r\nY"},
		{"###### six", "####### six"},
		{"####### seven", "####### seven"},
		{"# Title\n## Sub", "# Title\n### Sub"},
		{"```\n## in\n```\n## out", "```\n## in\n```\n### out"},
		{"~~~\n## in\n```\n## in\n~~~\n## out", "~~~\n## in\n```\n## in\n~~~\n### out"},
		{"````\n```\n## in\n````\n## out", "````\n```\n## in\n````\n### out"},
		{"```\n## in\n```  x\n## in", "```\n## in\n```  x\n## in\n```"}, // a closing fence has no info
		{"``` a`b\n## out", "``` a`b\n### out"},                         // not a fence
		{"~~~ a`b\n## in", "~~~ a`b\n## in\n~~~"},
		{"    ```\n## out", "    ```\n### out"},
		{"   ```\n## in", "   ```\n## in\n```"},
		{"text ## not a heading", "text ## not a heading"},
	}
	for _, tt := range tests {
		var b strings.Builder
		writeSection(&b, "S", tt.in)
		want := "## S\n\n" + tt.want + "\n\n"
		if got := b.String(); got != want {
			t.Errorf("section body of %q = %q, want %q", tt.in, got, want)
		}
	}
}

func TestSectionNames(t *testing.T) {
	tests := []struct {
		prompt string
		want   []string
	}{
		{"", nil},
		{"preamble\n\n## A\n\nx\n\n## B  \n\ny\n", []string{"A", "B"}},
		{"## A\n```\n## not\n```\n## B", []string{"A", "B"}},
		{"## A\n### sub\n#### subsub\n##no\n ## indented\n", []string{"A"}},
		{"## A\n~~~\n## not", []string{"A"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, SectionNames(tt.prompt)); diff != "" {
			t.Errorf("SectionNames(%q) (-want +got):\n%s", tt.prompt, diff)
		}
	}
}

// checkPrompt asserts properties 19, 20 and 21 for one persona.
func checkPrompt(t *testing.T, f Files, prompt string) {
	t.Helper()
	want := presentNames(f)
	// 19(c): the preamble comes first and explains how to write memory.md.
	if !strings.HasPrefix(prompt, testPreamble) || !strings.Contains(testPreamble, "Write") {
		t.Fatalf("prompt does not start with the preamble:\n%q", prompt)
	}
	// 21: the headings parse back to exactly the present sections; with the
	// oracle's Sections order that is 19(b) too.
	if got := SectionNames(prompt); !slices.Equal(want, got) {
		t.Fatalf("section names (-want +got):\n%s\nfiles: %q\nprompt:\n%q", cmp.Diff(want, got), f, prompt)
	}
	if got := f.Names(); !slices.Equal(want, got) {
		t.Fatalf("Files.Names (-want +got):\n%s", cmp.Diff(want, got))
	}
	// 20: one heading per present section (the count is in the comparison
	// above); 19(a): each wraps its own content, in order.
	at := len(testPreamble)
	for _, s := range Sections {
		c, ok := f[s.Name]
		if !ok || body(c) == "" {
			continue
		}
		for _, line := range strings.Split(strings.ToValidUTF8(c, "\uFFFD"), "\n") {
			if line = strings.TrimSpace(line); line == "" || strings.ContainsAny(line, "#`~") {
				continue
			}
			i := strings.Index(prompt[at:], line)
			if i < 0 {
				t.Fatalf("section %s lacks its line %q in order:\n%q", s.Name, line, prompt)
			}
			at += i + len(line)
		}
	}
	if !utf8.ValidString(prompt) {
		t.Fatalf("prompt is not valid UTF-8: %q", prompt)
	}
}

// Properties 19, 20 and 21 over random personas.
func TestAssembleProperties(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(19, 21))
	for i := 0; i < 5000; i++ {
		f := randomFiles(rng)
		checkPrompt(t, f, Assemble(f, testMemoryPath))
	}
}

func FuzzAssembleRoundTrip(f *testing.F) {
	f.Add("# Identity\nName: X\n", "## Values\nkind", "## Cron Jobs\n```\n## x\n", "", "# Memory\n- a\n", "tools", uint8(0x3f))
	f.Add("```", "~~~~\n## a\n~~~", "## Identity", "\xff\xfe", " \n", "````\n## y\n```\n", uint8(0x2d))
	f.Add("\uFEFF## A", "\r\n## B\r\n", "    ## C", "   ```\n## D", "## Long-Term Memory", "``` a`b\n## E", uint8(0x3f))
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g string, mask uint8) {
		files := Files{}
		for i, content := range []string{a, b, c, d, e, g} {
			if mask&(1<<i) != 0 {
				files[Sections[i].Name] = content
			}
		}
		checkPrompt(t, files, Assemble(files, testMemoryPath))
		note, _ := Changes(nil, files)
		if want, got := presentNames(files), SectionNames(note); !slices.Equal(want, got) {
			t.Fatalf("note sections (-want +got):\n%s", cmp.Diff(want, got))
		}
	})
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestHashes(t *testing.T) {
	f := Files{"Identity": "id\n", "Personality": " \n", "Long-Term Memory": "\n# Memory\n- a  \n\n"}
	want := map[string]string{"Identity": sha("id"), "Long-Term Memory": sha("# Memory\n- a")}
	if diff := cmp.Diff(want, f.Hashes()); diff != "" {
		t.Errorf("Hashes (-want +got):\n%s", diff)
	}
	// Only a change the model would see changes a hash.
	g := Files{"Identity": "id", "Long-Term Memory": "# Memory\n- a\n"}
	if diff := cmp.Diff(f.Hashes(), g.Hashes()); diff != "" {
		t.Errorf("trailing white space changed the hashes:\n%s", diff)
	}
}

func TestChanges(t *testing.T) {
	base := Files{"Identity": "id\n", "Long-Term Memory": "# Memory\n- a\n"}
	const head = "[Gateway note: your configuration files changed since this conversation started."
	tests := []struct {
		name        string
		old         map[string]string
		files       Files
		wantText    string
		wantChanged []string
	}{
		{
			name:  "unchanged",
			old:   base.Hashes(),
			files: Files{"Identity": "id", "Long-Term Memory": "# Memory\n- a\n", "Personality": "\n"},
		},
		{
			name:  "changed and added",
			old:   base.Hashes(),
			files: Files{"Identity": "id\n", "Long-Term Memory": "# Memory\n- a\n- b\n", "Tool Configuration": "## gh\nuse it"},
			wantText: head + " These sections replace the earlier versions in your system prompt:]\n\n" +
				"## Long-Term Memory\n\n# Memory\n- a\n- b\n\n" +
				"## Tool Configuration\n\n### gh\nuse it\n\n" +
				"[End of gateway note]\n\n",
			wantChanged: []string{"Long-Term Memory", "Tool Configuration"},
		},
		{
			name:  "removed only",
			old:   base.Hashes(),
			files: Files{"Long-Term Memory": "# Memory\n- a\n", "Identity": "  "},
			wantText: head + "]\n\n" +
				"[Removed sections, disregard their earlier versions: Identity]\n" +
				"[End of gateway note]\n\n",
			wantChanged: []string{"Identity"},
		},
		{
			name:  "changed and removed",
			old:   base.Hashes(),
			files: Files{"Identity": "new id"},
			wantText: head + " These sections replace the earlier versions in your system prompt:]\n\n" +
				"## Identity\n\nnew id\n\n" +
				"[Removed sections, disregard their earlier versions: Long-Term Memory]\n" +
				"[End of gateway note]\n\n",
			wantChanged: []string{"Identity", "Long-Term Memory"},
		},
		{
			name:  "unknown history sends everything",
			old:   nil,
			files: base,
			wantText: head + " These sections replace the earlier versions in your system prompt:]\n\n" +
				"## Identity\n\nid\n\n## Long-Term Memory\n\n# Memory\n- a\n\n[End of gateway note]\n\n",
			wantChanged: []string{"Identity", "Long-Term Memory"},
		},
		{
			name:  "unknown history and no persona",
			old:   nil,
			files: Files{},
		},
		{
			name:        "a session that saw no sections",
			old:         map[string]string{},
			files:       Files{"User Context": "u"},
			wantText:    head + " These sections replace the earlier versions in your system prompt:]\n\n## User Context\n\nu\n\n[End of gateway note]\n\n",
			wantChanged: []string{"User Context"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, changed := Changes(tt.old, tt.files)
			if diff := cmp.Diff(tt.wantText, text); diff != "" {
				t.Errorf("text (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantChanged, changed); diff != "" {
				t.Errorf("changed (-want +got):\n%s", diff)
			}
		})
	}
}

// A session that takes each note's sections as updates always ends up with
// the current persona.
func TestChangesProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(5, 5))
	for i := 0; i < 2000; i++ {
		before, after := randomFiles(rng), randomFiles(rng)
		if rng.IntN(3) == 0 {
			after = before
		}
		text, changed := Changes(before.Hashes(), after)
		var updated, removed []string
		for _, s := range Sections {
			h, now := after.Hashes()[s.Name]
			if prev, was := before.Hashes()[s.Name]; now && (!was || prev != h) {
				updated = append(updated, s.Name)
			} else if was && !now {
				removed = append(removed, s.Name)
			}
		}
		if diff := cmp.Diff(append(updated, removed...), changed); diff != "" {
			t.Fatalf("changed (-want +got):\n%s", diff)
		}
		if (text == "") != (len(changed) == 0) {
			t.Fatalf("text %q for changes %v", text, changed)
		}
		if diff := cmp.Diff(updated, SectionNames(text)); diff != "" {
			t.Fatalf("note sections (-want +got):\n%s\n%q", diff, text)
		}
	}
}

func BenchmarkAssemble(b *testing.B) {
	var file strings.Builder
	for i := 0; file.Len() < 4000; i++ {
		fmt.Fprintf(&file, "## Topic %d\n\nSome persona text that reads like a rule or a fact, long enough to be realistic.\n- a bullet point\n- another one with `code`\n\n```sh\n## a shell comment\necho %d\n```\n\n", i, i)
	}
	f := Files{}
	for _, s := range Sections {
		f[s.Name] = file.String()
	}
	b.ReportAllocs()
	b.SetBytes(int64(6 * file.Len()))
	for b.Loop() {
		Assemble(f, testMemoryPath)
	}
}
