package agent

import (
	"fmt"
	"maps"
	"os"
	"sync"

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
}

// acquire returns the prompt for files, writing a new version when they
// changed, and a release function the run calls when it is done.
func (c *promptCache) acquire(files persona.Files) (*prompt, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.current
	if p == nil || !maps.Equal(p.files, files) {
		text := persona.Assemble(files, c.memoryPath)
		path, err := writePromptFile(c.dir, text)
		if err != nil {
			return nil, nil, err
		}
		if old := c.current; old != nil {
			old.stale = true
			if old.users == 0 {
				os.Remove(old.path)
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
			os.Remove(p.path)
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
		if c.current.users == 0 {
			os.Remove(c.current.path)
		}
		c.current = nil
	}
}

// writePromptFile writes the system prompt to a private (0600) temp file.
func writePromptFile(dir, system string) (string, error) {
	f, err := os.CreateTemp(dir, "gateway-prompt-*.md")
	if err != nil {
		return "", fmt.Errorf("create system prompt file: %w", err)
	}
	name := f.Name()
	if _, err := f.WriteString(system); err != nil {
		f.Close()
		os.Remove(name)
		return "", fmt.Errorf("write system prompt file: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write system prompt file: %w", err)
	}
	return name, nil
}
