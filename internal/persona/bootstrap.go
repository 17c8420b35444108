package persona

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// The boot.md format (R20.1). Only "## " sections matter; a title and other
// text before the first one are ignored, and so are lines inside HTML
// comments when looking for headings and list items.
//
//	## Required
//	- soul.md
//	- identity.md
//
//	## Optional
//	- agents.md
//	- memory.md
//
//	## Default: soul.md
//	```markdown
//	# Soul
//
//	## Values
//	Be kind.
//	```
//
//	## Instructions
//	Free text for the operator.
//
// Required and Optional list file names as bullet items ("- ", "* " or "+ ";
// backticks and text after the name are ignored). Every listed file is
// created when missing; a missing required file is also logged as a
// warning. A list section left out keeps the built-in list (DefaultBoot);
// a present one, even empty, replaces it.
//
// "## Default: <file>" gives the content a missing file is created with: the
// first fenced code block in the section if there is one (so the content may
// hold "## " headings), else the section's text without surrounding blank
// lines. A file with a default but in neither list is optional. A listed
// file without one gets an empty header ("# Soul\n").
//
// "## Instructions" is kept in BootConfig.Instructions; the gateway does not
// run it.
//
// File names must be plain markdown names inside CONFIG_DIR: letters,
// digits and . _ - + @ only (so no path separators), no "..", not hidden,
// ending in ".md". Anything else, and
// unknown sections, are reported as problems and skipped.

// BootConfig is what boot.md asks for.
type BootConfig struct {
	Required []string
	Optional []string // never repeats a required file
	// Defaults holds the content of every listed file for when it has to be
	// created.
	Defaults     map[string]string
	Instructions string
}

// Default returns the content file is created with: its default if it has
// one, else an empty header.
func (c BootConfig) Default(file string) string {
	if d, ok := c.Defaults[file]; ok {
		return d
	}
	return emptyHeader(file)
}

// DefaultBoot is the configuration used when boot.md is missing (R20.5):
// soul.md and identity.md are required, the other persona files and
// heartbeat.md optional, each created with an empty header. heartbeat.md is
// created with its header only, so it defines no checks.
func DefaultBoot() BootConfig {
	c := BootConfig{
		Required: []string{SoulFile, IdentityFile},
		Optional: []string{AgentsFile, UserFile, MemoryFile, ToolsFile, HeartbeatFile},
		Defaults: map[string]string{},
	}
	for _, f := range append(slices.Clone(c.Required), c.Optional...) {
		c.Defaults[f] = emptyHeader(f)
	}
	return c
}

var builtinHeaders = map[string]string{
	SoulFile:      "# Soul\n",
	IdentityFile:  "# Identity\n",
	AgentsFile:    "# Operating Rules\n",
	UserFile:      "# User Context\n",
	MemoryFile:    MemoryHeader,
	ToolsFile:     "# Tool Configuration\n",
	HeartbeatFile: "# Heartbeat\n",
}

// emptyHeader is "# Title\n" for a file: a known one's usual title, else
// its name without ".md", dashes and underscores as spaces, capitalized.
func emptyHeader(file string) string {
	if h, ok := builtinHeaders[file]; ok {
		return h
	}
	title := strings.NewReplacer("-", " ", "_", " ").Replace(strings.TrimSuffix(file, ".md"))
	r := []rune(title)
	if len(r) > 0 {
		r[0] = unicode.ToUpper(r[0])
	}
	return "# " + string(r) + "\n"
}

// Problem is something Bootstrap skipped, with its boot.md line (0 when it
// concerns no line).
type Problem struct {
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Msg
	}
	return fmt.Sprintf("boot.md:%d: %s", p.Line, p.Msg)
}

// checkName says what is wrong with a file name from boot.md, or "".
func checkName(name string) string {
	switch {
	case name == "":
		return "empty file name"
	case strings.ContainsAny(name, `/\`) || strings.Contains(name, ".."):
		return fmt.Sprintf("%q is not a plain file name inside CONFIG_DIR", name)
	case strings.HasPrefix(name, "."):
		return fmt.Sprintf("%q is a hidden file", name)
	case strings.IndexFunc(name, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("._-+@", r)
	}) >= 0:
		return fmt.Sprintf("%q has characters other than letters, digits and . _ - + @", name)
	case !strings.HasSuffix(name, ".md") || name == ".md":
		return fmt.Sprintf("%q is not a markdown (.md) file", name)
	}
	return ""
}

type bootSection struct {
	kind  string // "required", "optional", "default", "instructions", "" (ignored)
	file  string // for "default"
	line  int    // the heading's line
	lines []string
	nums  []int
}

// ParseBoot reads boot.md content (format above). It never fails: what it
// cannot use is reported as a problem and skipped.
func ParseBoot(content string) (BootConfig, []Problem) {
	var problems []Problem
	report := func(line int, format string, args ...any) {
		problems = append(problems, Problem{Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	var sections []*bootSection
	var cur *bootSection
	var fence fenceState
	fenceLine := 0
	inComment := false
	for i, line := range strings.Split(content, "\n") {
		n := i + 1
		line = strings.TrimSuffix(line, "\r")
		wasOpen := fence.open
		inFence := fence.step(line)
		if inFence && !wasOpen {
			fenceLine = n
		}
		if !inFence && !inComment {
			if level, text := atxHeading(line); level == 2 {
				cur = newBootSection(text, n, report)
				sections = append(sections, cur)
				continue
			}
		}
		comment := inComment || (!inFence && strings.HasPrefix(strings.TrimSpace(line), "<!--"))
		if !inFence {
			inComment = updateComment(inComment, line)
		}
		if cur == nil {
			continue
		}
		if (cur.kind == "required" || cur.kind == "optional") && (comment || inFence) {
			continue
		}
		cur.lines = append(cur.lines, line)
		cur.nums = append(cur.nums, n)
	}
	if fence.open {
		report(fenceLine, "code fence is never closed: it runs to the end of boot.md")
	}

	def := DefaultBoot()
	cfg := BootConfig{Defaults: map[string]string{}}
	var required, optional, defaultOnly []string
	sawRequired, sawOptional := false, false
	explicit := map[string]int{} // listed file -> line, to report duplicates
	for _, s := range sections {
		switch s.kind {
		case "required", "optional":
			if s.kind == "required" {
				sawRequired = true
			} else {
				sawOptional = true
			}
			for j, line := range s.lines {
				name, ok := listItem(line)
				if !ok {
					if strings.TrimSpace(line) != "" {
						report(s.nums[j], "not a list item (\"- file.md\"): ignored")
					}
					continue
				}
				if msg := checkName(name); msg != "" {
					report(s.nums[j], "%s: ignored", msg)
					continue
				}
				if first, dup := explicit[name]; dup {
					report(s.nums[j], "%s is already listed on line %d: ignored", name, first)
					continue
				}
				explicit[name] = s.nums[j]
				if s.kind == "required" {
					required = append(required, name)
				} else {
					optional = append(optional, name)
				}
			}
		case "default":
			if _, dup := cfg.Defaults[s.file]; dup {
				report(s.line, "second default for %s: ignored", s.file)
				continue
			}
			d := defaultContent(s.lines)
			if d == "" {
				report(s.line, "default for %s is empty: it gets an empty header", s.file)
				d = emptyHeader(s.file)
			}
			cfg.Defaults[s.file] = d
			defaultOnly = append(defaultOnly, s.file)
		case "instructions":
			if cfg.Instructions != "" {
				cfg.Instructions += "\n\n"
			}
			cfg.Instructions += strings.Join(trimBlank(s.lines), "\n")
		}
	}
	if !sawRequired {
		required = def.Required
	}
	if !sawOptional {
		optional = def.Optional
	}
	listed := map[string]bool{}
	add := func(list *[]string, name string) {
		if !listed[name] {
			listed[name] = true
			*list = append(*list, name)
		}
	}
	for _, f := range required {
		add(&cfg.Required, f)
	}
	for _, f := range append(optional, defaultOnly...) {
		add(&cfg.Optional, f)
	}
	for _, f := range append(slices.Clone(cfg.Required), cfg.Optional...) {
		if _, ok := cfg.Defaults[f]; !ok {
			cfg.Defaults[f] = emptyHeader(f)
		}
	}
	slices.SortStableFunc(problems, func(a, b Problem) int { return a.Line - b.Line })
	return cfg, problems
}

func newBootSection(text string, line int, report func(int, string, ...any)) *bootSection {
	s := &bootSection{line: line}
	lower := strings.ToLower(text)
	switch {
	case lower == "required" || lower == "required files":
		s.kind = "required"
	case lower == "optional" || lower == "optional files":
		s.kind = "optional"
	case lower == "instructions":
		s.kind = "instructions"
	case len(text) >= len("default:") && strings.EqualFold(text[:len("default:")], "default:"):
		file := strings.Trim(strings.TrimSpace(text[len("default:"):]), "`")
		if msg := checkName(file); msg != "" {
			report(line, "%s: default ignored", msg)
			break
		}
		s.kind, s.file = "default", file
	default:
		report(line, "unknown section %q: ignored", text)
	}
	return s
}

// atxHeading returns the level and text of an ATX heading line, or 0.
func atxHeading(line string) (int, string) {
	i := indent(line)
	if i < 0 {
		return 0, ""
	}
	n := i
	for n < len(line) && line[n] == '#' {
		n++
	}
	level := n - i
	if level == 0 || level > 6 || (n < len(line) && line[n] != ' ' && line[n] != '\t') {
		return 0, ""
	}
	return level, strings.TrimSpace(line[n:])
}

// updateComment follows HTML comments ("<!--" ... "-->") across lines.
func updateComment(in bool, line string) bool {
	for {
		if in {
			i := strings.Index(line, "-->")
			if i < 0 {
				return true
			}
			in, line = false, line[i+3:]
			continue
		}
		i := strings.Index(line, "<!--")
		if i < 0 {
			return false
		}
		in, line = true, line[i+4:]
	}
}

// listItem returns the file name of a bullet item.
func listItem(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if len(t) < 2 || !strings.ContainsRune("-*+", rune(t[0])) || (t[1] != ' ' && t[1] != '\t') {
		return "", false
	}
	fields := strings.Fields(t[2:])
	if len(fields) == 0 {
		return "", false
	}
	name := fields[0]
	if strings.HasPrefix(name, "`") {
		if end := strings.Index(name[1:], "`"); end >= 0 {
			name = name[1 : end+1]
		}
	}
	return strings.TrimRight(strings.Trim(name, "`"), ":,;"), true
}

// defaultContent returns a Default section's content: its first fenced
// block, else its text, ending in a newline; "" when there is none.
func defaultContent(lines []string) string {
	var fence fenceState
	start := -1
	for i, line := range lines {
		wasOpen := fence.open
		fence.step(line)
		switch {
		case !wasOpen && fence.open && start < 0:
			start = i + 1
		case wasOpen && !fence.open && start >= 0:
			return joinLines(lines[start:i])
		}
	}
	if start >= 0 {
		return joinLines(lines[start:])
	}
	return joinLines(trimBlank(lines))
}

func joinLines(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// BootResult is what Bootstrap found and made.
type BootResult struct {
	Loaded   []string  // listed files that existed
	Created  []string  // listed files created with their default content
	Problems []Problem // boot.md problems and listed paths that are not files
	BootFile bool      // whether boot.md was read (else DefaultBoot was used)
}

// Bootstrap prepares CONFIG_DIR (R20): it creates dir if needed, reads
// boot.md (or uses DefaultBoot when it is missing) and creates every listed
// file that does not exist with its default content. Files are created
// atomically and never overwrite an existing file. It logs boot.md problems,
// a warning per missing required file, and the loaded and created files.
// It fails when dir or a missing file cannot be created or boot.md cannot be
// read.
func Bootstrap(dir string, log zerolog.Logger) (BootResult, error) {
	var res BootResult
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, fmt.Errorf("create config dir: %w", err)
	}
	cfg := DefaultBoot()
	content, err := readFile(filepath.Join(dir, BootFile), log.With().Str("file", BootFile).Logger())
	switch {
	case err == nil:
		res.BootFile = true
		cfg, res.Problems = ParseBoot(content)
	case errors.Is(err, fs.ErrNotExist):
		log.Info().Msg("no boot.md: using built-in defaults (soul.md and identity.md required)")
	default:
		return res, fmt.Errorf("read boot.md: %w", err)
	}
	for _, p := range res.Problems {
		log.Warn().Str("problem", p.String()).Msg("boot.md problem")
	}
	var errs []error
	for i, name := range append(slices.Clone(cfg.Required), cfg.Optional...) {
		required := i < len(cfg.Required)
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		switch {
		case err == nil && fi.Mode().IsRegular():
			res.Loaded = append(res.Loaded, name)
			continue
		case err == nil:
			p := Problem{Msg: fmt.Sprintf("%s is not a regular file (%s): left alone", name, fi.Mode().Type())}
			res.Problems = append(res.Problems, p)
			log.Warn().Str("problem", p.String()).Msg("bootstrap")
			continue
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, fmt.Errorf("check %s: %w", name, err))
			continue
		}
		created, err := atomicfile.Create(path, []byte(cfg.Default(name)), filePerm)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !created:
			res.Loaded = append(res.Loaded, name) // appeared meanwhile
		default:
			res.Created = append(res.Created, name)
			if required {
				log.Warn().Str("file", name).Msg("required persona file was missing: created it with its default content")
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	log.Info().Strs("loaded", res.Loaded).Strs("created", res.Created).Bool("boot_md", res.BootFile).Msg("bootstrap complete")
	return res, nil
}
