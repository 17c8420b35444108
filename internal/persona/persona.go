// Package persona reads the agent's persona from the markdown files in
// CONFIG_DIR, assembles them into the system prompt, bootstraps missing files
// (boot.md) and protects memory.md from concurrent agent runs.
//
// Load reads the files fresh on every call, so an edit on disk reaches the
// next event (R13.5, R14.4, R15.4, R16.4) and a restart needs no other state
// (R21.3). A Loader and a MemoryGuard keep what they read and read a file
// again only when it changed, which they learn from the process's inotify
// watch where it reports every change (one read(2) per event instead of a
// stat(2) per file; see changeWatch), else from a stat of each file. Assemble, SectionNames, Hashes, Changes and
// ParseBoot are pure functions. Load and Bootstrap touch only CONFIG_DIR and
// may be called concurrently; a MemoryGuard is safe for concurrent use.
//
// Skills (skills.go), CONFIG_DIR/skills/<name>/SKILL.md, are listed by name,
// description and path in a section of their own after the persona files;
// the agent reads a skill's file when it needs it.
//
// No file is read past MaxFileSize (256 KiB): a larger persona file reaches
// the prompt cut off with a note, and a larger memory.md is not merged by the
// MemoryGuard (it is left untouched and the run is told, see
// ErrMemoryTooLarge), so a runaway file costs the gateway no more memory than
// that.
//
// Decision: agents.md is included whole, its "## Cron Jobs", "## Hooks" and
// "## Webhooks" sections too (they tell the agent what scheduled work exists);
// a later change may strip them from the prompt.
package persona

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// File names inside CONFIG_DIR.
const (
	SoulFile      = "soul.md"
	IdentityFile  = "identity.md"
	AgentsFile    = "agents.md"
	UserFile      = "user.md"
	MemoryFile    = "memory.md"
	ToolsFile     = "tools.md"
	BootFile      = "boot.md"
	HeartbeatFile = "heartbeat.md"
)

// MaxFileSize is the most Load reads of one persona file. The rest is cut
// off with a note, so a runaway memory.md cannot blow up the prompt. It is
// also the largest memory.md a MemoryGuard reads and merges; a larger one is
// left alone.
const MaxFileSize = 256 << 10

// MemoryHeader is the content memory.md is created with (R15.5).
const MemoryHeader = "# Memory\n"

// filePerm is the mode of files the gateway creates in CONFIG_DIR: they hold
// personal context, so only the owner reads them.
const filePerm = 0o600

// Section is one labelled part of the system prompt and the file it comes from.
type Section struct {
	Name string // the heading in the prompt: "## <Name>"
	File string // the file in CONFIG_DIR
}

// Sections lists the prompt sections in prompt order (DESIGN decision 10,
// R22.2). Callers must not modify it.
var Sections = []Section{
	{Name: "Identity", File: IdentityFile},
	{Name: "Personality", File: SoulFile},
	{Name: "Operating Rules", File: AgentsFile},
	{Name: "User Context", File: UserFile},
	{Name: "Long-Term Memory", File: MemoryFile},
	{Name: "Tool Configuration", File: ToolsFile},
}

// SkillsSection is the prompt section listing the skills in CONFIG_DIR/skills
// (see LoadSkills). It has no file of its own, so it is not in Sections: it
// comes after them, and Load adds it only when there is a skill to list.
const SkillsSection = "Skills"

// sectionOrder is every prompt section's name in prompt order.
var sectionOrder = func() []string {
	names := make([]string, 0, len(Sections)+1)
	for _, s := range Sections {
		names = append(names, s.Name)
	}
	return append(names, SkillsSection)
}()

// Files holds the persona files as read, keyed by section name ("Identity"),
// and the skills listing under SkillsSection. A missing or unreadable file
// has no entry; an empty one has an empty entry and, like a whitespace-only
// one, yields no section.
type Files map[string]string

// Names returns the names of the sections Assemble includes for f, in prompt
// order.
func (f Files) Names() []string {
	var names []string
	for _, name := range sectionOrder {
		if body(f[name]) != "" {
			names = append(names, name)
		}
	}
	return names
}

// Load reads the six section files from dir. A missing file is logged as a
// warning and has no entry, except memory.md, which is created with
// MemoryHeader (R15.5). A file that cannot be read (permissions, a directory)
// is logged and left out. Invalid UTF-8 is repaired and a byte order mark
// dropped; a file larger than MaxFileSize is cut off with a note. The skills
// in dir/skills are listed under SkillsSection when there are any, and
// their problems logged as warnings. Load fails only when dir itself is not
// a readable directory.
func Load(dir string, log zerolog.Logger) (Files, error) {
	files, err := load(dir, sectionPaths(dir), log, readFile)
	if err != nil {
		return nil, err
	}
	addSkills(files, dir, nil, log)
	return files, nil
}

// Loader is Load for a process that loads the same directory for every
// event: it reads a file again only when the file changed (see fileCache),
// so edits still reach the next event. Skills are read every time (at most
// 64 KiB of each SKILL.md), and each of their problems is logged once, not
// at every event. It is safe for concurrent use.
type Loader struct {
	dir    string
	paths  []string // per Sections entry
	cache  fileCache
	skills skillReport

	mu sync.Mutex // guards noSkills
	// noSkills is the watch's version of the skills directory when it was
	// last found missing; nil when it was not (or is not watched).
	noSkills *version
}

// NewLoader returns a Loader for dir.
func NewLoader(dir string) *Loader { return &Loader{dir: dir, paths: sectionPaths(dir)} }

// Load is persona.Load with unchanged files taken from the cache.
func (l *Loader) Load(log zerolog.Logger) (Files, error) {
	changes().drain() // once for the six files
	files, err := load(l.dir, l.paths, log, func(path string, log zerolog.Logger) (string, error) {
		content, _, err := l.cache.readDrained(path, func() (string, error) { return readFile(path, log) })
		return content, err
	})
	if err != nil {
		return nil, err
	}
	l.addSkills(files, log)
	return files, nil
}

// addSkills is addSkills, skipped while the skills directory is missing
// and the watch reports no change of it: there is nothing to list, and
// nothing new to log.
func (l *Loader) addSkills(files Files, log zerolog.Logger) {
	path := filepath.Join(l.dir, SkillsDir)
	l.mu.Lock()
	missing := l.noSkills
	l.mu.Unlock()
	if missing != nil && changes().current(path) == *missing {
		return
	}
	checked, watched := changes().watchMissing(path)
	addSkills(files, l.dir, &l.skills, log)
	_, err := os.Lstat(path)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.noSkills = nil
	if watched && errors.Is(err, fs.ErrNotExist) && files[SkillsSection] == "" {
		l.noSkills = &checked
	}
}

func sectionPaths(dir string) []string {
	paths := make([]string, len(Sections))
	for i, s := range Sections {
		paths[i] = filepath.Join(dir, s.File)
	}
	return paths
}

func load(dir string, paths []string, log zerolog.Logger, read func(string, zerolog.Logger) (string, error)) (Files, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config dir: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("config dir %s: not a directory", dir)
	}
	files := make(Files, len(Sections))
	for i, s := range Sections {
		path := paths[i]
		content, err := read(path, log)
		if errors.Is(err, fs.ErrNotExist) && s.File == MemoryFile {
			if _, err := atomicfile.Create(path, []byte(MemoryHeader), filePerm); err != nil {
				log.Error().Str("file", s.File).Err(err).Msg("memory.md is missing and could not be created: section omitted")
				continue
			}
			log.Info().Str("file", s.File).Msg("created memory.md")
			content, err = read(path, log)
		}
		switch {
		case err == nil:
			files[s.Name] = content
		case errors.Is(err, fs.ErrNotExist):
			log.Warn().Str("file", s.File).Str("section", s.Name).Msg("persona file missing: section omitted")
		default:
			log.Error().Str("file", s.File).Err(err).Str("section", s.Name).Msg("persona file unreadable: section omitted")
		}
	}
	return files, nil
}

// readFile reads one persona file: at most MaxFileSize bytes, without a byte
// order mark, as valid UTF-8. It refuses anything but a regular file (so a
// FIFO cannot block it) and logs what it had to repair.
func readFile(path string, log zerolog.Logger) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file (%s)", filepath.Base(path), fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", err
	}
	truncated := len(data) > MaxFileSize
	if truncated {
		data = cut(data, MaxFileSize)
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	s := string(data)
	if !utf8.ValidString(s) {
		log.Warn().Str("file", filepath.Base(path)).Msg("persona file is not valid UTF-8: bad bytes replaced with U+FFFD")
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if truncated {
		log.Warn().Str("file", filepath.Base(path)).Int("limit_bytes", MaxFileSize).Int64("size_bytes", fi.Size()).
			Msg("persona file too large: the prompt gets only its beginning")
		s = strings.TrimRight(s, "\n") + fmt.Sprintf(
			"\n\n[gateway: the rest of %s was cut off here because the file is larger than %d KiB; read the file itself to see all of it]\n",
			filepath.Base(path), MaxFileSize>>10)
	}
	return s, nil
}

// cut shortens data to at most n bytes, at the last line break if there is
// one, else at a rune boundary.
func cut(data []byte, n int) []byte {
	data = data[:n]
	if i := bytes.LastIndexByte(data, '\n'); i > 0 {
		return data[:i+1]
	}
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}
