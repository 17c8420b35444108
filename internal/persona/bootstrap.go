package persona

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// BootFile holds the bootstrap parameters (R20.1).
const BootFile = "boot.md"

// BootConfig says which files must exist and what a created file contains.
type BootConfig struct {
	Required []string
	Optional []string
	Defaults map[string]string
}

// DefaultBoot is used when boot.md is missing (R20.5): soul.md and
// identity.md are required, the other persona files optional, and each is
// created with an empty section header.
func DefaultBoot() BootConfig {
	return BootConfig{
		Required: []string{"soul.md", "identity.md"},
		Optional: []string{"agents.md", "user.md", MemoryFile, "tools.md"},
		Defaults: map[string]string{
			"soul.md":     "# Soul\n",
			"identity.md": "# Identity\n",
			"agents.md":   "# Operating Rules\n",
			"user.md":     "# User\n",
			MemoryFile:    "# Memory\n",
			"tools.md":    "# Tools\n",
		},
	}
}

// Problem is something wrong in boot.md, with its line number.
type Problem struct {
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("boot.md:%d: %s", p.Line, p.Msg) }

// ParseBoot reads boot.md:
//
//	## Required
//	- soul.md
//	## Optional
//	- tools.md
//	## Default: soul.md
//	(the file's default content, up to the next "## Required",
//	"## Optional" or "## Default:" line)
//
// Other text is ignored. A file named by a Default section but in neither
// list is optional. Names must be plain .md file names inside CONFIG_DIR;
// others are reported and skipped. Files without a Default get an empty
// section header.
func ParseBoot(content string) (BootConfig, []Problem) {
	cfg := BootConfig{Defaults: map[string]string{}}
	var problems []Problem
	listed := map[string]bool{}
	var mode, current string
	var body []string
	flush := func() {
		if current != "" {
			cfg.Defaults[current] = strings.TrimLeft(strings.Join(body, "\n"), "\n")
			if !strings.HasSuffix(cfg.Defaults[current], "\n") {
				cfg.Defaults[current] += "\n"
			}
		}
		current, body = "", nil
	}
	add := func(list *[]string, name string, line int) bool {
		if msg := checkName(name); msg != "" {
			problems = append(problems, Problem{line, msg})
			return false
		}
		if !listed[name] {
			listed[name] = true
			*list = append(*list, name)
		}
		return true
	}
	for i, line := range strings.Split(strings.ReplaceAll(content, "\r\n", "\n"), "\n") {
		n := i + 1
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.EqualFold(trimmed, "## Required"):
			flush()
			mode = "required"
			continue
		case strings.EqualFold(trimmed, "## Optional"):
			flush()
			mode = "optional"
			continue
		case len(trimmed) > 11 && strings.EqualFold(trimmed[:11], "## Default:"):
			flush()
			mode = "default"
			name := strings.TrimSpace(trimmed[11:])
			if msg := checkName(name); msg != "" {
				problems = append(problems, Problem{n, msg})
				mode = ""
				continue
			}
			current = name
			continue
		}
		switch mode {
		case "required", "optional":
			item, ok := strings.CutPrefix(trimmed, "- ")
			if !ok {
				item, ok = strings.CutPrefix(trimmed, "* ")
			}
			if !ok {
				continue
			}
			list := &cfg.Optional
			if mode == "required" {
				list = &cfg.Required
			}
			add(list, strings.Trim(strings.TrimSpace(item), "`"), n)
		case "default":
			body = append(body, line)
		}
	}
	flush()
	for name := range cfg.Defaults {
		if !listed[name] {
			listed[name] = true
			cfg.Optional = append(cfg.Optional, name)
		}
	}
	for _, name := range append(append([]string{}, cfg.Required...), cfg.Optional...) {
		if _, ok := cfg.Defaults[name]; !ok {
			cfg.Defaults[name] = "# " + strings.TrimSuffix(name, ".md") + "\n"
		}
	}
	return cfg, problems
}

func checkName(name string) string {
	switch {
	case name == "":
		return "empty file name"
	case strings.ContainsAny(name, `/\`) || name == "." || name == ".." || strings.HasPrefix(name, "."):
		return fmt.Sprintf("%q is not a plain file name inside CONFIG_DIR", name)
	case !strings.HasSuffix(name, ".md"):
		return fmt.Sprintf("%q is not a markdown (.md) file", name)
	}
	return ""
}

// BootResult lists what Bootstrap found and made.
type BootResult struct {
	Loaded   []string
	Created  []string
	Problems []Problem
}

// Bootstrap prepares dir: it reads boot.md (or uses DefaultBoot), creates
// dir and every missing listed file with its default content, and never
// overwrites an existing file (R20.2-R20.4).
func Bootstrap(dir string, log zerolog.Logger) (BootResult, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return BootResult{}, fmt.Errorf("create config dir: %w", err)
	}
	cfg := DefaultBoot()
	var res BootResult
	data, err := os.ReadFile(filepath.Join(dir, BootFile))
	switch {
	case err == nil:
		cfg, res.Problems = ParseBoot(string(data))
		for _, p := range res.Problems {
			log.Warn().Str("problem", p.String()).Msg("boot.md")
		}
	case errors.Is(err, fs.ErrNotExist):
		log.Info().Msg("no boot.md: using built-in defaults (soul.md and identity.md required)")
	default:
		return BootResult{}, fmt.Errorf("read boot.md: %w", err)
	}
	required := map[string]bool{}
	for _, name := range cfg.Required {
		required[name] = true
	}
	for _, name := range append(append([]string{}, cfg.Required...), cfg.Optional...) {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			res.Loaded = append(res.Loaded, name)
			continue
		}
		if err := atomicfile.Write(path, []byte(cfg.Defaults[name]), 0o644); err != nil {
			return res, fmt.Errorf("create %s: %w", name, err)
		}
		res.Created = append(res.Created, name)
		if required[name] {
			log.Warn().Str("file", name).Msg("required persona file was missing: created it with default content")
		}
	}
	log.Info().Strs("loaded", res.Loaded).Strs("created", res.Created).Msg("bootstrap complete")
	return res, nil
}
