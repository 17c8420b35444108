package schedule

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentgateway/gateway/internal/persona"
)

// ReadHeartbeats reads and parses heartbeat.md in dir. A missing file is an
// error matching fs.ErrNotExist.
func ReadHeartbeats(dir string) ([]Heartbeat, []Problem, error) {
	text, err := ReadFile(dir, HeartbeatFile)
	if err != nil {
		return nil, nil, err
	}
	checks, problems := ParseHeartbeats(text)
	return checks, problems, nil
}

// ReadAgents reads and parses the scheduled work in agents.md in dir. A
// missing file is an error matching fs.ErrNotExist.
func ReadAgents(dir string) (Agents, []Problem, error) {
	text, err := ReadFile(dir, AgentsFile)
	if err != nil {
		return Agents{}, nil, err
	}
	a, problems := ParseAgents(text)
	return a, problems, nil
}

// ReadFile reads the config file name in dir: a regular file (so a FIFO
// cannot block it) of at most persona.MaxFileSize bytes. A larger file is
// refused rather than cut, since a cut could change what it schedules. A
// missing file is an error matching fs.ErrNotExist.
func ReadFile(dir, name string) (string, error) {
	path := filepath.Join(dir, name)
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
	data, err := io.ReadAll(io.LimitReader(f, persona.MaxFileSize+1))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if len(data) > persona.MaxFileSize {
		return "", fmt.Errorf("%s is larger than %d KiB", filepath.Base(path), persona.MaxFileSize>>10)
	}
	return string(data), nil
}

// Reload reads heartbeat.md and agents.md from dir and applies them; see
// ReloadFrom.
func (s *Scheduler) Reload(dir string) error {
	return s.ReloadFrom(func(name string) (string, error) { return ReadFile(dir, name) })
}

// ReloadFrom reads heartbeat.md and agents.md through read (which returns
// an error matching fs.ErrNotExist for a missing file) and applies them (see
// Apply). Each file is handled on its own:
//
//   - A missing heartbeat.md means no heartbeats, a missing agents.md no
//     cron jobs, hooks or webhooks (logged at info level).
//   - A file that cannot be read, or that has problems, keeps the items last
//     applied from it; each problem is logged with its file and line. An
//     edit that breaks a file never stops what was running.
//   - The first time a file is read there is nothing to keep, so its valid
//     items are applied despite its problems.
//
// The error is Apply's: items gocron refused.
func (s *Scheduler) ReloadFrom(read func(name string) (string, error)) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	cfg := s.current

	text, err := read(HeartbeatFile)
	var checks []Heartbeat
	var problems []Problem
	if err == nil {
		checks, problems = ParseHeartbeats(text)
	}
	if s.accept(HeartbeatFile, problems, err) {
		cfg.Heartbeats = checks
	}
	text, err = read(AgentsFile)
	var agents Agents
	problems = nil
	if err == nil {
		agents, problems = ParseAgents(text)
	}
	if s.accept(AgentsFile, problems, err) {
		cfg.Agents = agents
	}
	return s.applyLocked(cfg)
}

// accept logs the outcome of reading file and reports whether its parsed
// items should replace the last applied ones. applyMu must be held.
func (s *Scheduler) accept(file string, problems []Problem, err error) bool {
	log := s.log.With().Str("file", file).Logger()
	switch {
	case errors.Is(err, fs.ErrNotExist):
		log.Info().Msg("config file not found: nothing scheduled from it")
	case err != nil:
		log.Error().Err(err).Msg("config file unreadable: keeping the last good schedule from it")
		return false
	case len(problems) > 0:
		for _, p := range problems {
			log.Warn().Int("line", p.Line).Msg(p.Message)
		}
		if s.loaded[file] {
			log.Warn().Int("problems", len(problems)).Msg("config file has problems: keeping the last good schedule from it")
			return false
		}
		log.Warn().Int("problems", len(problems)).Msg("config file has problems: its valid items are applied")
	}
	s.loaded[file] = true
	return true
}
