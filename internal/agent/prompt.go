package agent

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/persona"
)

// promptCache holds the assembled system prompt, its section hashes and its
// temp file for the persona files as last seen. Events share them while the
// files are unchanged, so an event costs no assembly, hashing or file
// write; a changed file gives the next event a new prompt. Old prompt files
// are removed once no run uses them. It is safe for concurrent use.
type promptCache struct {
	dir        string // for the temp files; "" is os.TempDir()
	memoryPath string

	mu      sync.Mutex // guards everything below
	current *prompt
	// group, when set, is the group the prompt files are given to and
	// may read them (the agent user's primary group, AGENT_USER).
	group *uint32
}

// ShareSystemPromptWith makes the system prompt files readable by the group
// gid (mode 0640, owner unchanged): the agent user's primary group when the
// CLIs run as another user (AGENT_USER), which could not read a private file
// of the gateway's. The gateway keeps owning the files, so it can remove
// them from a sticky temp dir; changing their group needs membership of gid
// or CAP_CHOWN. Files already written keep their mode. Call it before the
// first event.
func (r *Runtime) ShareSystemPromptWith(gid uint32) {
	r.prompts.mu.Lock()
	defer r.prompts.mu.Unlock()
	r.prompts.group = &gid
}

// sharedGroup is the group prompt files are given to, if any.
func (c *promptCache) sharedGroup() *uint32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.group
}

// prompt is one version of the system prompt.
type prompt struct {
	files  persona.Files
	text   string
	hashes map[string]string
	path   string
	// users counts the runs holding the file; stale marks a version that
	// is no longer current, whose file goes when users drops to zero.
	users int
	stale bool
	// variants are this prompt with an event's own sections added (the
	// channel's instructions, its Discord actions), by those sections:
	// most turns of a channel use the same one, so it is written once.
	variants map[string]*variant
}

// variant is the file of a prompt with an event's own sections.
type variant struct {
	path  string
	users int
}

// maxIdleVariants bounds the variant files kept while no run uses them.
const maxIdleVariants = 32

// variant returns the file of p's text followed by extra, writing it the
// first time, and a release function the run calls when it is done.
func (c *promptCache) variant(p *prompt, extra string) (string, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := p.variants[extra]
	if v == nil {
		path, err := writePromptFile(c.dir, p.text+extra, c.group)
		if err != nil {
			return "", nil, err
		}
		if p.variants == nil {
			p.variants = map[string]*variant{}
		}
		if len(p.variants) >= maxIdleVariants {
			dropIdle(p)
		}
		v = &variant{path: path}
		p.variants[extra] = v
	}
	v.users++
	release := sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		v.users--
		if p.stale && v.users == 0 {
			removePromptFile(v.path)
			delete(p.variants, extra)
		}
	})
	return v.path, release, nil
}

// dropIdle removes the variant files of p no run uses.
func dropIdle(p *prompt) {
	for k, v := range p.variants {
		if v.users == 0 {
			removePromptFile(v.path)
			delete(p.variants, k)
		}
	}
}

// acquire returns the prompt for files, writing a new version when they
// changed, and a release function the run calls when it is done.
func (c *promptCache) acquire(files persona.Files) (*prompt, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.current
	if p == nil || !maps.Equal(p.files, files) {
		text := persona.Assemble(files, c.memoryPath)
		path, err := writePromptFile(c.dir, text, c.group)
		if err != nil {
			return nil, nil, err
		}
		if old := c.current; old != nil {
			old.stale = true
			dropIdle(old)
			if old.users == 0 {
				removePromptFile(old.path)
			}
		}
		p = &prompt{files: files, text: text, hashes: files.Hashes(), path: path}
		c.current = p
	}
	p.users++
	release := sync.OnceFunc(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		p.users--
		if p.stale && p.users == 0 {
			removePromptFile(p.path)
		}
	})
	return p, release, nil
}

// close removes the current prompt file (shutdown).
func (c *promptCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.current != nil {
		c.current.stale = true
		dropIdle(c.current)
		if c.current.users == 0 {
			removePromptFile(c.current.path)
		}
		c.current = nil
	}
}

// promptFilePrefix begins the name of every system prompt file; the pid of
// the gateway that wrote it follows: gateway-prompt-<pid>-<random>.md.
const promptFilePrefix = "gateway-prompt-"

var (
	// ownPromptsMu guards ownPrompts: the prompt files (cleaned paths) this
	// process has written and not yet removed, whichever Runtime wrote them.
	ownPromptsMu sync.Mutex
	ownPrompts   = map[string]struct{}{}
)

// writePromptFile writes the system prompt to a private (0600) temp file
// named after this process; with a group, the file belongs to that group and
// is readable by it (0640).
func writePromptFile(dir, system string, group *uint32) (string, error) {
	ownPromptsMu.Lock()
	defer ownPromptsMu.Unlock()
	f, err := os.CreateTemp(dir, promptFilePrefix+strconv.Itoa(os.Getpid())+"-*.md")
	if err != nil {
		return "", fmt.Errorf("create system prompt file: %w", err)
	}
	name := f.Name()
	if _, err := f.WriteString(system); err != nil {
		f.Close()
		os.Remove(name)
		return "", fmt.Errorf("write system prompt file: %w", err)
	}
	if group != nil {
		if err := shareWithGroup(f, *group); err != nil {
			f.Close()
			os.Remove(name)
			return "", err
		}
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write system prompt file: %w", err)
	}
	ownPrompts[filepath.Clean(name)] = struct{}{}
	return name, nil
}

// shareWithGroup gives f to the group gid, readable by it and by nobody
// else (0640). The group comes first, so no other group ever reads it.
func shareWithGroup(f *os.File, gid uint32) error {
	if err := f.Chown(-1, int(gid)); err != nil {
		return fmt.Errorf("give the system prompt file to the agent user's group %d: %w", gid, err)
	}
	if err := f.Chmod(0o640); err != nil {
		return fmt.Errorf("make the system prompt file readable by its group: %w", err)
	}
	return nil
}

// removePromptFile removes a prompt file this process wrote.
func removePromptFile(path string) {
	ownPromptsMu.Lock()
	defer ownPromptsMu.Unlock()
	os.Remove(path)
	delete(ownPrompts, filepath.Clean(path))
}

// RemoveStalePromptFiles removes the system prompt files that a gateway which
// no longer runs (it crashed or was killed) left in dir ("" is os.TempDir()).
// A file names the pid of the gateway that wrote it: files of a live process
// stay, so gateways sharing dir leave each other's alone. Files named with
// this process's own pid that it did not write itself are stale too (a
// gateway restarted in a container often gets the same pid). Call it at
// startup; it is safe to call at any time. Failures are logged, not returned:
// a stale file costs only disk space.
func RemoveStalePromptFiles(dir string, log zerolog.Logger) {
	if dir == "" {
		dir = os.TempDir()
	}
	matches, err := filepath.Glob(filepath.Join(dir, promptFilePrefix+"*.md"))
	if err != nil {
		log.Warn().Err(err).Msg("look for stale system prompt files in the temp dir")
		return
	}
	self := os.Getpid()
	ownPromptsMu.Lock()
	defer ownPromptsMu.Unlock()
	removed := 0
	for _, path := range matches {
		pid, ok := promptFileOwner(filepath.Base(path))
		if !ok {
			continue // not named by a gateway that records its pid
		}
		if pid == self {
			if _, mine := ownPrompts[filepath.Clean(path)]; mine {
				continue
			}
		} else if processAlive(pid) {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn().Err(files.WithoutPath(err)).Str("file", filepath.Base(path)).Msg("remove stale system prompt file in the temp dir")
			continue
		}
		removed++
	}
	if removed > 0 {
		log.Info().Int("files", removed).Msg("removed system prompt files left in the temp dir by a gateway that no longer runs")
	}
}

// promptFileOwner parses the pid out of a name written by writePromptFile.
func promptFileOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, promptFilePrefix)
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != digits {
		return 0, false
	}
	return pid, true
}

// processAlive reports whether a process with this pid exists (it may
// belong to another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
