package kvpersona

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/agentgateway/gateway/internal/persona"
)

// personaFiles are the operator's files in CONFIG_DIR that every worker
// needs: the prompt's sections but memory.md, heartbeat.md (the schedule)
// and boot.md. The files boot.md lists and the skills directory are added
// to them (collect).
var personaFiles = []string{
	persona.SoulFile, persona.IdentityFile, persona.AgentsFile, persona.UserFile, persona.ToolsFile,
	persona.HeartbeatFile, persona.BootFile,
}

// Limits on what a push takes from a directory: one file at most what the
// persona reads of a file (persona.MaxFileSize), so that no worker is given
// a file the prompt would cut off, and a bound on the count, so a stray
// tree under skills/ is refused rather than uploaded.
const (
	maxFiles     = 512
	maxSkillPath = 6 // components under skills/<name>/
)

// collect reads the persona files of dir: the files of personaFiles that
// exist, the ones boot.md lists (but memory.md), and every file under
// skills/<name>/ (hidden entries skipped; a skill directory may be a
// symbolic link, as persona.LoadSkills allows). Names are slash-separated
// and relative to dir. A file that is too large, or is not a regular file,
// is an error naming it: nothing is pushed then.
func collect(dir string) (map[string][]byte, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("persona directory: %w", pathless(err))
	}
	if !fi.IsDir() {
		return nil, errors.New("persona directory: not a directory")
	}
	files := map[string][]byte{}
	names := slices.Clone(personaFiles)
	if boot, err := readLimited(filepath.Join(dir, persona.BootFile)); err == nil {
		cfg, _ := persona.ParseBoot(string(boot))
		names = append(names, cfg.Required...)
		names = append(names, cfg.Optional...)
	}
	var errs []error
	for _, name := range names {
		if name == persona.MemoryFile {
			continue
		}
		if _, done := files[name]; done {
			continue
		}
		data, err := readLimited(filepath.Join(dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		default:
			files[name] = data
		}
	}
	if err := collectSkills(dir, files); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return files, nil
}

// collectSkills adds the files under dir/skills/<name>/ to files.
func collectSkills(dir string, files map[string][]byte) error {
	root := filepath.Join(dir, persona.SkillsDir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", persona.SkillsDir, pathless(err))
	}
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		skill := filepath.Join(root, e.Name())
		// A skill directory may be a symbolic link; WalkDir does not
		// follow one at its root.
		real, err := filepath.EvalSymlinks(skill)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", persona.SkillsDir, e.Name(), pathless(err)))
			continue
		}
		if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
			continue // files next to the skill directories are not skills
		}
		err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return pathless(err)
			}
			rel, _ := filepath.Rel(real, p)
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			name := path.Join(persona.SkillsDir, e.Name(), filepath.ToSlash(rel))
			if strings.Count(rel, string(filepath.Separator)) >= maxSkillPath {
				return fmt.Errorf("%s: more than %d directories deep under the skill", name, maxSkillPath)
			}
			if d.IsDir() {
				return nil
			}
			if len(files) >= maxFiles {
				return fmt.Errorf("more than %d persona files (at %s)", maxFiles, name)
			}
			data, err := readLimited(p)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			files[name] = data
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errTooLarge is a persona file larger than persona.MaxFileSize.
var errTooLarge = fmt.Errorf("larger than the %d KiB the persona reads of a file: not pushed; trim or split it", persona.MaxFileSize>>10)

// readLimited reads a regular file of at most persona.MaxFileSize bytes,
// without blocking on a FIFO.
func readLimited(p string) ([]byte, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	if fi.Size() > persona.MaxFileSize {
		return nil, errTooLarge
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, pathless(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, persona.MaxFileSize+1))
	if err != nil {
		return nil, pathless(err)
	}
	if len(data) > persona.MaxFileSize {
		return nil, errTooLarge
	}
	return data, nil
}

// pathless drops the path from a file error: messages name files relative
// to the directory, not where it is on the server.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// keyOf is the bucket key of a persona file's name. Keys may hold only
// letters, digits and - / _ = . (no "..", no dot at either end), so every
// other byte, "=" and a dot that would break those rules are written =XX
// (hex); nameOf reverses it. Plain names (soul.md, skills/x/SKILL.md) are
// their own keys, so `nats kv ls gateway-persona` reads as the directory.
func keyOf(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		plain := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '/'
		if c == '.' {
			plain = i > 0 && i < len(name)-1 && name[i-1] != '.' && name[i-1] != '/'
		}
		if plain {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

// nameOf is the file name of a bucket key, checked to be one a push
// writes: a markdown file at the top (not memory.md) or a file under
// skills/<name>/, with no empty, hidden, "." or ".." part. A worker writes
// only such names, whatever the bucket holds.
func nameOf(key string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] != '=' {
			b.WriteByte(key[i])
			continue
		}
		var c byte
		if i+2 >= len(key) || !unhex(key[i+1], key[i+2], &c) {
			return "", fmt.Errorf("key %q: a bad escape", key)
		}
		b.WriteByte(c)
		i += 2
	}
	name := b.String()
	parts := strings.Split(name, "/")
	for _, p := range parts {
		if p == "" || strings.HasPrefix(p, ".") || strings.ContainsAny(p, "\\\x00") {
			return "", fmt.Errorf("key %q: not a persona file name", key)
		}
	}
	switch {
	case len(parts) == 1 && strings.HasSuffix(name, ".md") && name != persona.MemoryFile:
	case len(parts) >= 3 && len(parts) <= 2+maxSkillPath && parts[0] == persona.SkillsDir:
	default:
		return "", fmt.Errorf("key %q: not a persona file name", key)
	}
	return name, nil
}

func unhex(hi, lo byte, c *byte) bool {
	v := 0
	for _, x := range []byte{hi, lo} {
		switch {
		case x >= '0' && x <= '9':
			v = v*16 + int(x-'0')
		case x >= 'A' && x <= 'F':
			v = v*16 + int(x-'A'+10)
		default:
			return false
		}
	}
	*c = byte(v)
	return true
}
