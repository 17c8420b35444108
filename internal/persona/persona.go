// Package persona reads the persona files in CONFIG_DIR, assembles the
// system prompt from them, bootstraps missing files, and protects memory.md
// from concurrent rewrites.
//
// Files are read fresh on every call: an edit takes effect on the next event
// without a restart (R13.5, R14.4, R16.4). Load and Assemble are safe for
// concurrent use; a MemoryGuard serializes its own work.
package persona

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// MemoryFile is the agent-writable long-term memory.
const MemoryFile = "memory.md"

// MaxFileSize bounds what one persona file contributes to the prompt, so a
// runaway memory.md cannot blow up every request.
const MaxFileSize = 256 << 10

// Section is one part of the system prompt and the file it comes from.
type Section struct {
	Name string
	File string
}

// Sections in prompt order (DESIGN decision 10, R22.2).
var Sections = []Section{
	{"Identity", "identity.md"},
	{"Personality", "soul.md"},
	{"Operating Rules", "agents.md"},
	{"User Context", "user.md"},
	{"Long-Term Memory", MemoryFile},
	{"Tool Configuration", "tools.md"},
}

// Files holds the content of each present section file, by section name.
// A missing or unreadable file has no entry.
type Files map[string]string

// Load reads the six files from dir. A missing memory.md is created with a
// "# Memory" header (R15.5); other missing or unreadable files are logged
// and left out. Load fails only if dir itself cannot be used.
func Load(dir string, log zerolog.Logger) (Files, error) {
	files := Files{}
	for _, s := range Sections {
		path := filepath.Join(dir, s.File)
		content, err := readLimited(path, log)
		if errors.Is(err, fs.ErrNotExist) && s.File == MemoryFile {
			if err := createMemory(path); err != nil {
				return nil, err
			}
			log.Info().Str("file", s.File).Msg("created memory.md")
			content, err = "# Memory\n", nil
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Warn().Str("file", s.File).Str("section", s.Name).Msg("persona file missing: section left out")
			continue
		case err != nil:
			log.Error().Err(err).Str("file", s.File).Msg("persona file unreadable: section left out")
			continue
		}
		files[s.Name] = content
	}
	return files, nil
}

func createMemory(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	if err := atomicfile.Write(path, []byte("# Memory\n"), 0o644); err != nil {
		return fmt.Errorf("create memory.md: %w", err)
	}
	return nil
}

// readLimited reads a persona file as valid UTF-8 without a BOM, cut at
// MaxFileSize.
func readLimited(path string, log zerolog.Logger) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if len(data) > MaxFileSize {
		log.Warn().Str("file", filepath.Base(path)).Int("limit_bytes", MaxFileSize).Msg("persona file too large: only its start is used")
		data = data[:MaxFileSize]
		for len(data) > 0 && !utf8.Valid(data[len(data)-min(len(data), 3):]) && !utf8.RuneStart(data[len(data)-1]) {
			data = data[:len(data)-1]
		}
	}
	s := strings.TrimPrefix(string(data), "\uFEFF")
	if !utf8.ValidString(s) {
		log.Warn().Str("file", filepath.Base(path)).Msg("persona file is not valid UTF-8: bad bytes replaced")
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s, nil
}

// Hashes returns a hash of each present section, by name.
func (f Files) Hashes() map[string]string {
	out := make(map[string]string, len(f))
	for name, content := range f {
		if strings.TrimSpace(content) == "" {
			continue
		}
		sum := sha256.Sum256([]byte(content))
		out[name] = hex.EncodeToString(sum[:12])
	}
	return out
}
