package persona

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// Skills are instructions for particular tasks, one per directory:
// CONFIG_DIR/skills/<name>/SKILL.md, in the format Claude Code uses.
//
//	---
//	name: release-notes
//	description: Write release notes from the git log since the last tag.
//	---
//	# Release notes
//	...the full instructions...
//
// Only the front matter is used: the prompt lists each skill's name,
// description and the absolute path of its SKILL.md, and the agent reads
// the file itself when a task matches. The listing is the SkillsSection of
// Files, so like a persona file it is read fresh for every event and a
// change reaches a resumed session as a changed section.
//
// The front matter is a small subset of YAML, enough for name and
// description: "key: value" lines, the value on the same line, plain or
// quoted with "..." (Go escapes) or '...' ('' for a quote). A plain value
// ends at " #" (a YAML comment) and must not start a flow collection ([ or
// {). Blank lines, comment lines and other keys (allowed-tools, its
// indented list too) are ignored. Block values (description: >) and values
// continued on the next line are refused with an error saying so, rather
// than read differently from a YAML parser.
//
// Decision: a skill is listed under its directory name. A name in the front
// matter that differs is reported, but the skill is still listed, as the
// directory it is in: directory names are unique, so two skills can never
// share a name, and a typo in the front matter does not hide a skill. A
// directory whose name is not a valid skill name is reported and skipped.

// SkillsDir is the directory in CONFIG_DIR that holds the skills.
const SkillsDir = "skills"

// SkillFile is the file in a skill's directory that describes it.
const SkillFile = "SKILL.md"

// Limits on a skill's front matter, the ones Claude Code sets.
const (
	MaxSkillName        = 64   // bytes (the name is ASCII)
	MaxSkillDescription = 1024 // characters
)

// maxSkillRead is the most read of one SKILL.md: its front matter must end
// within it.
const maxSkillRead = 64 << 10

// skillsIntro opens the Skills section.
const skillsIntro = "Skills are instructions for particular tasks. When a task matches a skill's description, read its SKILL.md first and follow it."

// Skill is one skill as listed in the prompt.
type Skill struct {
	// Name is lowercase letters, digits and hyphens, at most MaxSkillName
	// bytes.
	Name string
	// Description is one line, not empty, at most MaxSkillDescription
	// characters.
	Description string
	// Path is the absolute path of the skill's SKILL.md; LoadSkills sets it.
	Path string
}

// Line is the skill's entry in the listing: "- name: description (path)",
// on one line whatever the fields hold, so a description cannot start a
// heading or a fence of its own in the prompt.
func (s Skill) Line() string {
	return "- " + oneLine(s.Name) + ": " + oneLine(s.Description) + " (" + oneLine(s.Path) + ")"
}

// RenderSkills returns the body of the Skills section listing skills in
// order, or "" when there are none (the prompt then has no such section).
func RenderSkills(skills []Skill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(skillsIntro)
	b.WriteString("\n\n")
	for _, s := range skills {
		b.WriteString(s.Line())
		b.WriteByte('\n')
	}
	return b.String()
}

// ParseSkill reads the name and description from a SKILL.md's front matter
// (see the format note above); the file's body is not looked at. The
// description is made one line: invalid UTF-8 replaced, control characters
// and runs of white space turned into one space. An error is a short
// sentence saying what to fix.
func ParseSkill(data []byte) (Skill, error) {
	rest := string(bytes.TrimPrefix(data, []byte("\uFEFF")))
	first, rest, _ := strings.Cut(rest, "\n")
	if !isFenceLine(first) {
		return Skill{}, errors.New("no front matter (it must start with a line ---)")
	}
	var (
		values = map[string]string{} // name and description, once given
		key    string                // the key the lines being read belong to
		closed bool
	)
	for n := 2; rest != "" && !closed; n++ {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		line = strings.TrimSuffix(line, "\r")
		trimmed := strings.TrimSpace(line)
		switch {
		case isFenceLine(line):
			closed = true
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			// blank or a comment
		case line[0] == ' ' || line[0] == '\t' || trimmed == "-" || strings.HasPrefix(line, "- "):
			// An indented line or a list item belongs to the key above.
			switch key {
			case "":
				return Skill{}, fmt.Errorf("front matter line %d belongs to no key", n)
			case "name", "description":
				return Skill{}, fmt.Errorf("%s: write the value on one line, after \"%s:\" (values over several lines are not supported)", key, key)
			}
		default:
			k, v, ok := cutKey(line)
			if !ok {
				return Skill{}, fmt.Errorf("front matter line %d is not \"key: value\"", n)
			}
			key = k
			if k != "name" && k != "description" {
				continue
			}
			if _, dup := values[k]; dup {
				return Skill{}, fmt.Errorf("%s is given twice in the front matter", k)
			}
			s, err := scalar(v)
			if err != nil {
				return Skill{}, fmt.Errorf("%s: %w", k, err)
			}
			values[k] = s
		}
	}
	if !closed {
		return Skill{}, errors.New("the front matter does not end (no second line ---)")
	}
	name, ok := values["name"]
	if !ok {
		return Skill{}, errors.New("no name in the front matter")
	}
	if err := checkSkillName(name); err != nil {
		return Skill{}, fmt.Errorf("name: %w", err)
	}
	desc, ok := values["description"]
	if !ok {
		return Skill{}, errors.New("no description in the front matter")
	}
	desc = oneLine(desc)
	if desc == "" {
		return Skill{}, errors.New("the description is empty: say when the skill applies")
	}
	if n := utf8.RuneCountInString(desc); n > MaxSkillDescription {
		return Skill{}, fmt.Errorf("the description has %d characters, more than %d", n, MaxSkillDescription)
	}
	return Skill{Name: name, Description: desc}, nil
}

// isFenceLine reports whether line opens or closes the front matter.
func isFenceLine(line string) bool { return strings.TrimRight(line, " \t\r") == "---" }

// cutKey splits "key: value" at the first colon followed by white space or
// the end of the line, as YAML does.
func cutKey(line string) (key, value string, ok bool) {
	for i := 0; i < len(line); i++ {
		if line[i] != ':' {
			continue
		}
		if i+1 == len(line) || line[i+1] == ' ' || line[i+1] == '\t' {
			key = strings.TrimSpace(line[:i])
			return key, line[i+1:], key != ""
		}
	}
	return "", "", false
}

// scalar returns a value as written after "key:" (see the format note).
func scalar(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '"', '\'':
		end := closingQuote(v)
		if end < 0 {
			return "", fmt.Errorf("the value starts with %c but does not end with one on the same line", v[0])
		}
		if after := strings.TrimSpace(v[end+1:]); after != "" && !strings.HasPrefix(after, "#") {
			return "", fmt.Errorf("text after the closing %c", v[0])
		}
		if v[0] == '\'' {
			return strings.ReplaceAll(v[1:end], "''", "'"), nil
		}
		s, err := strconv.Unquote(v[:end+1])
		if err != nil {
			return "", errors.New("the quoted value has an escape that is not supported (use \\\" and \\\\)")
		}
		return s, nil
	case '>', '|':
		return "", errors.New("block values (> or |) are not supported: write the value on one line")
	case '[', '{':
		return "", fmt.Errorf("a value starting with %c must be quoted", v[0])
	case '#':
		return "", nil // only a comment
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	if i := strings.Index(v, "\t#"); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v), nil
}

// closingQuote returns the index of the quote that closes v, which starts
// with one, or -1.
func closingQuote(v string) int {
	q := v[0]
	for i := 1; i < len(v); i++ {
		switch {
		case q == '"' && v[i] == '\\':
			i++ // skip the escaped character
		case v[i] == q && q == '\'' && i+1 < len(v) && v[i+1] == '\'':
			i++ // '' is a quote
		case v[i] == q:
			return i
		}
	}
	return -1
}

// checkSkillName returns why name is not a valid skill name, or nil.
func checkSkillName(name string) error {
	if name == "" {
		return errors.New("it is empty")
	}
	if len(name) > MaxSkillName {
		return fmt.Errorf("%q is longer than %d characters", name, MaxSkillName)
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return fmt.Errorf("%q has characters other than lowercase letters, digits and hyphens", name)
		}
	}
	return nil
}

// oneLine returns s as valid UTF-8 on one line: control characters and runs
// of white space (line and paragraph separators too) become one space, and
// there is none at either end.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
}

// LoadSkills reads the skills in configDir/skills: each directory's
// SKILL.md, in the order of the directory names, at most 64 KiB of it. It
// returns the valid skills, with absolute paths, and one error per problem,
// naming the file relative to configDir. A skill whose front matter names
// it differently is listed under its directory name and reported too. Hidden
// entries and files next to the skill directories are skipped; a symbolic
// link to a directory is a skill like any other. A missing skills directory
// means no skills and no error. Nothing blocks on a FIFO.
func LoadSkills(configDir string) ([]Skill, []error) {
	root := filepath.Join(configDir, SkillsDir)
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var (
		skills []Skill
		errs   []error
	)
	if err != nil {
		// ReadDir returns what it read before the error.
		errs = append(errs, fmt.Errorf("%s: cannot list the directory: %w", SkillsDir, pathless(err)))
	}
	for _, e := range entries {
		dir := e.Name()
		if strings.HasPrefix(dir, ".") {
			continue
		}
		rel := SkillsDir + "/" + dir
		fi, err := os.Stat(filepath.Join(root, dir))
		if err != nil {
			if e.Type()&fs.ModeSymlink != 0 && errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("%s: the symbolic link points nowhere", quoteRel(rel)))
			} else {
				errs = append(errs, fmt.Errorf("%s: %w", quoteRel(rel), pathless(err)))
			}
			continue
		}
		if !fi.IsDir() {
			continue
		}
		if err := checkSkillName(dir); err != nil {
			errs = append(errs, fmt.Errorf("%s: skipped, the directory name is the skill's name and %w", quoteRel(rel), err))
			continue
		}
		rel += "/" + SkillFile
		path := filepath.Join(root, dir, SkillFile)
		data, err := readSkillFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("%s: missing; each directory in %s/ is a skill described by its %s", rel, SkillsDir, SkillFile))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
			continue
		}
		s, err := ParseSkill(data)
		if err != nil {
			if len(data) == maxSkillRead {
				err = fmt.Errorf("%w (only the first %d KiB are read)", err, maxSkillRead>>10)
			}
			errs = append(errs, fmt.Errorf("%s: %w", rel, err))
			continue
		}
		if s.Name != dir {
			errs = append(errs, fmt.Errorf("%s: the front matter says name: %s, but the directory is %s; listed as %s (rename one to match)", rel, s.Name, dir, dir))
			s.Name = dir
		}
		s.Path = path
		skills = append(skills, s)
	}
	return skills, errs
}

// readSkillFile returns the first maxSkillRead bytes of a SKILL.md. It
// refuses anything but a regular file, and opens without blocking, so a
// FIFO swapped in after the check cannot hang it either.
func readSkillFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, pathless(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxSkillRead))
	if err != nil {
		return nil, fmt.Errorf("read: %w", pathless(err))
	}
	return data, nil
}

// quoteRel quotes a path for a message when a directory name would not
// read plainly in it (it is not a valid skill name, so it may hold
// anything, a line break too).
func quoteRel(rel string) string {
	if oneLine(rel) == rel && !strings.ContainsAny(rel, " \"") {
		return rel
	}
	return strconv.Quote(rel)
}

// pathless drops the path from a file error: messages name files relative
// to CONFIG_DIR, not where CONFIG_DIR is on the server.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// skillReport logs the problems LoadSkills found and the listed skills each
// time they change, not at every event. It is safe for concurrent use.
type skillReport struct {
	mu       sync.Mutex          // guards the fields below
	problems map[string]struct{} // as last logged
	listed   string              // the listed skill names as last logged
}

// log logs each problem not logged at the last call as a warning, and the
// listed skills when they changed. A nil report logs every problem.
func (r *skillReport) log(skills []Skill, errs []error, log zerolog.Logger) {
	names := make([]string, len(skills))
	for i, s := range skills {
		names[i] = s.Name
	}
	if r == nil {
		for _, err := range errs {
			log.Warn().Err(err).Msg("skill problem")
		}
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := make(map[string]struct{}, len(errs))
	for _, err := range errs {
		msg := err.Error()
		seen[msg] = struct{}{}
		if _, old := r.problems[msg]; !old {
			log.Warn().Err(err).Msg("skill problem")
		}
	}
	r.problems = seen
	if listed := strings.Join(names, ","); listed != r.listed {
		r.listed = listed
		log.Info().Strs("skills", names).Msg("skills listed in the system prompt")
	}
}

// addSkills adds the Skills section for the skills in dir to files, if there
// are any, and reports what LoadSkills found.
func addSkills(files Files, dir string, report *skillReport, log zerolog.Logger) {
	skills, errs := LoadSkills(dir)
	report.log(skills, errs, log)
	if text := RenderSkills(skills); text != "" {
		files[SkillsSection] = text
	}
}
