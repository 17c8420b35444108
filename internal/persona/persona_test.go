package persona

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

func testLog(t *testing.T) zerolog.Logger { return zerolog.New(zerolog.NewTestWriter(t)) }

// captureLog logs to the test and to a buffer the test can inspect.
func captureLog(t *testing.T) (zerolog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return zerolog.New(io.MultiWriter(zerolog.NewTestWriter(t), &buf)), &buf
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// contentParts are the pieces random section contents are made of: nested
// headings, fences (closed and not), blank and odd white space, CR, invalid
// UTF-8 and a BOM.
var contentParts = []string{
	"", " ", "\n", "\n\n", "  \t\n", "\u00a0", "\r\n",
	"# Title", "## Nested heading", "### Deeper", "## Identity", "## Long-Term Memory", "##", "##no space", "   ## indented", "    ## code",
	"###### six", "####### seven",
	"plain text", "- a fact", "ünïcødé ✓", "bad \xff\xfe bytes", "\uFEFF",
	"```", "```go", "````", "~~~", "~~~~ info", "``` a`b", "  ```", "\t```",
	"<!--", "-->", "[Gateway note]",
}

func randomContent(rng *rand.Rand) string {
	var b strings.Builder
	for i := rng.IntN(8); i >= 0; i-- {
		b.WriteString(contentParts[rng.IntN(len(contentParts))])
		if rng.IntN(4) > 0 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func randomFiles(rng *rand.Rand) Files {
	f := Files{}
	for _, s := range Sections {
		if rng.IntN(4) > 0 {
			f[s.Name] = randomContent(rng)
		}
	}
	return f
}

// presentNames is the oracle for which sections a prompt has: those whose
// content is not blank once made valid UTF-8.
func presentNames(f Files) []string {
	var names []string
	for _, s := range Sections {
		if strings.TrimSpace(strings.ToValidUTF8(f[s.Name], "\uFFFD")) != "" {
			names = append(names, s.Name)
		}
	}
	return names
}

func TestLoad(t *testing.T) {
	big := strings.Repeat("- a fact that is long enough to fill the file quickly\n", MaxFileSize/40)
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  Files
		// logs holds substrings the log must contain.
		logs []string
	}{
		{
			name: "all present",
			setup: func(t *testing.T, dir string) {
				for _, s := range Sections {
					writeFile(t, filepath.Join(dir, s.File), "# "+s.Name+"\n")
				}
			},
			want: Files{"Identity": "# Identity\n", "Personality": "# Personality\n", "Operating Rules": "# Operating Rules\n",
				"User Context": "# User Context\n", "Long-Term Memory": "# Long-Term Memory\n", "Tool Configuration": "# Tool Configuration\n"},
		},
		{
			name:  "missing files are left out, memory.md is created",
			setup: func(t *testing.T, dir string) {},
			want:  Files{"Long-Term Memory": MemoryHeader},
			logs: []string{`"file":"identity.md"`, `"file":"soul.md"`, `"file":"agents.md"`, `"file":"user.md"`, `"file":"tools.md"`,
				"persona file missing", "created memory.md"},
		},
		{
			name: "byte order mark and invalid UTF-8",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, IdentityFile), "\uFEFF# Identity\nName: Bot\n")
				writeFile(t, filepath.Join(dir, SoulFile), "bad \xff byte\n")
				writeFile(t, filepath.Join(dir, MemoryFile), "")
			},
			want: Files{"Identity": "# Identity\nName: Bot\n", "Personality": "bad \uFFFD byte\n", "Long-Term Memory": ""},
			logs: []string{"not valid UTF-8"},
		},
		{
			name: "a directory and a FIFO are not files",
			setup: func(t *testing.T, dir string) {
				if err := os.Mkdir(filepath.Join(dir, UserFile), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(filepath.Join(dir, ToolsFile), 0o644); err != nil {
					t.Skip("no FIFOs here:", err)
				}
				writeFile(t, filepath.Join(dir, MemoryFile), "# Memory\n- kept\n")
			},
			want: Files{"Long-Term Memory": "# Memory\n- kept\n"},
			logs: []string{"persona file unreadable", `"file":"user.md"`, `"file":"tools.md"`},
		},
		{
			name: "a symlink is followed",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, "real.md"), "linked\n")
				if err := os.Symlink("real.md", filepath.Join(dir, SoulFile)); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(dir, MemoryFile), "m\n")
			},
			want: Files{"Personality": "linked\n", "Long-Term Memory": "m\n"},
		},
		{
			name: "a file too large is cut at a line",
			setup: func(t *testing.T, dir string) {
				writeFile(t, filepath.Join(dir, MemoryFile), big)
			},
			want: Files{"Long-Term Memory": big[:strings.LastIndexByte(big[:MaxFileSize], '\n')] +
				"\n\n[gateway: the rest of memory.md was cut off here because the file is larger than 256 KiB; read the file itself to see all of it]\n"},
			logs: []string{"persona file too large"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tt.setup(t, dir)
			log, buf := captureLog(t)
			got, err := Load(dir, log)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Load (-want +got):\n%s", diff)
			}
			for _, s := range tt.logs {
				if !strings.Contains(buf.String(), s) {
					t.Errorf("log lacks %q:\n%s", s, buf)
				}
			}
		})
	}
}

func TestLoadUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, SoulFile), "secret")
	if err := os.Chmod(filepath.Join(dir, SoulFile), 0); err != nil {
		t.Fatal(err)
	}
	log, buf := captureLog(t)
	got, err := Load(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["Personality"]; ok || !strings.Contains(buf.String(), "persona file unreadable") {
		t.Errorf("Load = %v, log:\n%s", got, buf)
	}
}

func TestLoadMissingDir(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope"), testLog(t))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing dir: %v, want fs.ErrNotExist", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "")
	if _, err := Load(file, testLog(t)); err == nil {
		t.Error("Load of a file as dir succeeded")
	}
}

// R13.5, R14.4, R15.4, R16.4: every Load reads the disk again.
func TestLoadReadsFresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, UserFile)
	for _, content := range []string{"first\n", "second\n", ""} {
		writeFile(t, path, content)
		f, err := Load(dir, testLog(t))
		if err != nil {
			t.Fatal(err)
		}
		if f["User Context"] != content {
			t.Errorf("after writing %q Load gave %q", content, f["User Context"])
		}
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	f, _ := Load(dir, testLog(t))
	if _, ok := f["User Context"]; ok {
		t.Error("a deleted user.md is still a section")
	}
}

// Property 28: the files are the whole state. Writing a persona to a fresh
// CONFIG_DIR and loading it ("after a restart") assembles the same prompt as
// the persona itself, and so does every later load.
func TestRestartReconstructsPrompt(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(28, 28))
	for i := 0; i < 300; i++ {
		f := randomFiles(rng)
		for name, c := range f {
			// What Load repairs (invalid UTF-8, a leading BOM) cannot
			// round-trip byte for byte.
			f[name] = strings.TrimPrefix(strings.ToValidUTF8(c, "?"), "\uFEFF")
		}
		dir := t.TempDir()
		for _, s := range Sections {
			if c, ok := f[s.Name]; ok {
				writeFile(t, filepath.Join(dir, s.File), c)
			}
		}
		if _, ok := f["Long-Term Memory"]; !ok {
			f["Long-Term Memory"] = MemoryHeader // Load creates it
		}
		mem := filepath.Join(dir, MemoryFile)
		want := Assemble(f, mem)
		for restart := 0; restart < 2; restart++ {
			loaded, err := Load(dir, zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, Assemble(loaded, mem)); diff != "" {
				t.Fatalf("iteration %d, load %d: prompt differs (-want +got):\n%s", i, restart, diff)
			}
		}
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"ab\ncd\nef", 7, "ab\ncd\n"},
		{"abcdef", 4, "abcd"},
		{"ab\u00e9cd", 3, "ab"},             // é is 2 bytes: do not split it
		{"a\u20acb", 3, "a"},                // € is 3 bytes
		{"\n" + "abc", 3, "\nab"},           // a newline at 0 is no cut point
		{"ab\u20acd", 5, "ab\u20ac"},        // the rune fits
		{"\xff\xff\xff\xff", 2, "\xff\xff"}, // not UTF-8: cut anywhere
	}
	for _, tt := range tests {
		if got := string(cut([]byte(tt.in), tt.n)); got != tt.want {
			t.Errorf("cut(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}
