package backends

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/proc"
)

// ErrNotTheAgents is the error of MoveSession when the session's
// transcript or a folder on the way to it or to its copy is not the plain
// one of the agent's own it should be: a link, a file with other names
// (a hard link), someone else's.
var ErrNotTheAgents = errors.New("the session's files are not the agent's own plain files")

// maxTranscript bounds the transcript MoveSession copies; claude's
// transcripts of long sessions are a few megabytes.
const maxTranscript = 256 << 20

// MoveSession makes a claude session last used in directory from
// resumable in directory to. claude keeps each session's transcript under
// its config directory ($CLAUDE_CONFIG_DIR, else $HOME/.claude) in
// projects/<the directory, every character but letters and digits made
// "-">/<id>.jsonl, and --resume finds only the sessions of the directory it
// runs in. The transcript is copied, so the old directory keeps its own.
// A session the new directory has already is left alone.
//
// The config directory is the agent's and the session id is in its
// environment, so the agent can put a link, a hard link or a FIFO where
// the transcript should be, or link a folder on the way, and the gateway
// may be root. So every folder below the agent's home is opened without
// following a link; the transcript is opened as the agent (AGENT_USER)
// would open it and must be a regular file with no other name, owned by
// the agent (the gateway's own user without AGENT_USER); the copy is
// created, never replaced, in a folder of the agent's reached the same
// way, and given to the agent. Anything else is refused with
// ErrNotTheAgents or another error that names no path: the caller then
// starts the channel on a fresh session.
func (c *Claude) MoveSession(id, from, to string) error {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return fmt.Errorf("move claude session: invalid session id %q", id)
	}
	root, rel := c.configRoot()
	if root == "" {
		return errors.New("move claude session: no HOME or CLAUDE_CONFIG_DIR to find it in")
	}
	name := id + ".jsonl"
	// A fast look only: a link here makes the move do nothing, and the
	// create below is what decides.
	if _, err := os.Lstat(filepath.Join(root, rel, "projects", claudeProjectDir(to), name)); err == nil {
		return nil
	}
	owner, gid := os.Geteuid(), os.Getegid()
	var agent *proc.Credential
	if c.opts.RunAs != nil {
		agent = c.opts.credential()
		owner, gid = int(agent.UID), int(agent.GID)
	}

	g := files.Guard{Agent: agent}
	src, err := g.Open(filepath.Join(rel, "projects", claudeProjectDir(from), name), root)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("move claude session: no transcript of session %s for the old directory", id)
	}
	if err != nil {
		return fmt.Errorf("move claude session: open the transcript: %w", files.WithoutPath(err))
	}
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("move claude session: %w", err)
	}
	if st.Nlink != 1 || int(st.Uid) != owner {
		return fmt.Errorf("move claude session: the transcript: %w", ErrNotTheAgents)
	}
	if st.Size > maxTranscript {
		return fmt.Errorf("move claude session: the transcript is over %d MiB", maxTranscript>>20)
	}

	dir, err := agentFolder(root, rel, claudeProjectDir(to), owner, gid)
	if err != nil {
		return fmt.Errorf("move claude session: the new directory's folder: %w", err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("move claude session: create the copy: %w", err)
	}
	dst := os.NewFile(uintptr(fd), name)
	err = dst.Chown(owner, gid)
	if err == nil {
		// Only what was there when it was checked.
		_, err = io.Copy(dst, io.LimitReader(src, st.Size))
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		unix.Unlinkat(dir, name, 0)
		return fmt.Errorf("move claude session: copy the transcript: %w", files.WithoutPath(err))
	}
	return nil
}

// configRoot is where claude's config directory is reached from: root is
// opened as it is (the operator chose it: the agent's home, or
// CLAUDE_CONFIG_DIR outside it) and rel is the way below it, the agent's
// own, walked one folder at a time without following links.
func (c *Claude) configRoot() (root, rel string) {
	var home, dir string
	for _, kv := range c.opts.Env {
		name, val, _ := strings.Cut(kv, "=")
		switch name {
		case "CLAUDE_CONFIG_DIR":
			dir = val
		case "HOME":
			home = val
		}
	}
	if dir == "" {
		if home == "" {
			return "", ""
		}
		return home, ".claude"
	}
	if home != "" && filepath.IsAbs(dir) {
		if r, err := filepath.Rel(home, dir); err == nil && r != "." && r != ".." && !strings.HasPrefix(r, "../") {
			return home, r
		}
	}
	return dir, ""
}

// agentFolder opens root/rel/projects/name, making the last one (0700,
// given to owner) when it is missing: every folder below root is opened
// without following a link and must belong to owner.
func agentFolder(root, rel, name string, owner, gid int) (int, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, files.WithoutPath(&os.PathError{Op: "open", Path: root, Err: err})
	}
	var parts []string
	if rel != "" {
		parts = strings.Split(filepath.Clean(rel), "/")
	}
	parts = append(parts, "projects", name)
	for i, part := range parts {
		last := i == len(parts)-1
		made := false
		if last {
			err := unix.Mkdirat(fd, part, 0o700)
			if err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, fmt.Errorf("make it: %w", err)
			}
			made = err == nil
		}
		next, err := unix.Openat(fd, part, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return -1, ErrNotTheAgents
		}
		if err != nil {
			return -1, fmt.Errorf("open it: %w", err)
		}
		fd = next
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, err
		}
		if made && int(st.Uid) == os.Geteuid() && int(st.Uid) != owner {
			// The gateway made it for the agent: hand it over.
			if err := unix.Fchown(fd, owner, gid); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("give it to the agent: %w", err)
			}
			st.Uid = uint32(owner)
		}
		if int(st.Uid) != owner {
			unix.Close(fd)
			return -1, ErrNotTheAgents
		}
	}
	return fd, nil
}

// claudeProjectDir is the name claude gives a working directory's
// sessions folder.
func claudeProjectDir(dir string) string {
	return strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, dir)
}

// ErrNoSession is the error of FindSession for a session the CLI does not
// have (or an id that cannot be one).
var ErrNoSession = errors.New("no such session")

// SessionInfo is a session a CLI keeps on disk, as a person picking one
// to continue sees it.
type SessionInfo struct {
	ID string
	// Dir is the working directory the session was made in (claude keeps
	// sessions per directory).
	Dir string
	// FirstPrompt is the session's first user prompt, trimmed, at most
	// maxFirstPrompt bytes; empty when none was found.
	FirstPrompt string
	// Modified is when the session's transcript last changed.
	Modified time.Time
}

// TranscriptHead is what the start of a claude transcript says of its
// session.
type TranscriptHead struct {
	SessionID string
	// Dir is the first working directory (cwd) recorded.
	Dir string
	// FirstPrompt is the first prompt a person wrote: not a tool result, a
	// side chain (sub-agent) or a line claude adds itself (isMeta, slash
	// command echoes). Trimmed, at most maxFirstPrompt bytes.
	FirstPrompt string
}

const (
	// maxFirstPrompt bounds TranscriptHead.FirstPrompt, in bytes.
	maxFirstPrompt = 2000
	// transcriptHeadSize is how much of a transcript is read for its
	// head: the first prompt is among the first lines, after a few
	// bookkeeping lines that can hold the whole system prompt.
	transcriptHeadSize = 4 << 20
)

// ParseClaudeTranscript reads the head of a claude session transcript
// (~/.claude/projects/<dir>/<id>.jsonl: one JSON object per line, see
// testdata/claude/transcripts). It is pure and total: lines that are not
// JSON, or not of the expected shape, are skipped, and a transcript with
// nothing recognisable gives the zero TranscriptHead.
func ParseClaudeTranscript(data []byte) TranscriptHead {
	var h TranscriptHead
	for len(data) > 0 && (h.FirstPrompt == "" || h.Dir == "" || h.SessionID == "") {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte("\n"))
		var l struct {
			Type        string          `json:"type"`
			IsMeta      bool            `json:"isMeta"`
			IsSidechain bool            `json:"isSidechain"`
			Cwd         json.RawMessage `json:"cwd"`
			SessionID   json.RawMessage `json:"sessionId"`
			Message     json.RawMessage `json:"message"`
		}
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		if h.Dir == "" {
			h.Dir = rawString(l.Cwd)
		}
		if h.SessionID == "" {
			h.SessionID = rawString(l.SessionID)
		}
		if h.FirstPrompt == "" && l.Type == "user" && !l.IsMeta && !l.IsSidechain {
			h.FirstPrompt = userPrompt(l.Message)
		}
	}
	return h
}

// rawString is raw as a string, "" when it is not one.
func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// userPrompt is the text a person wrote in a user message, "" for a tool
// result or a line claude writes itself (a slash command, a shell escape).
func userPrompt(raw json.RawMessage) string {
	var m struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil || m.Role != "user" {
		return ""
	}
	text := rawString(m.Content)
	if text == "" {
		var blocks []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &blocks) != nil {
			return ""
		}
		var parts []string
		for _, b := range blocks {
			switch b.Type {
			case "tool_result":
				return ""
			case "text":
				if t := strings.TrimSpace(b.Text); t != "" {
					parts = append(parts, t)
				}
			}
		}
		text = strings.Join(parts, "\n")
	}
	text = strings.TrimSpace(text)
	for _, p := range []string{"<command-", "<local-command-", "<bash-", "<system-reminder>"} {
		if strings.HasPrefix(text, p) {
			return ""
		}
	}
	if len(text) > maxFirstPrompt {
		text = strings.TrimSpace(strings.ToValidUTF8(text[:maxFirstPrompt], ""))
	}
	return text
}

// Sessions lists the newest sessions (at most limit) claude keeps for
// directory dir, newest first by the transcript's modification time, each
// with its first prompt. A directory without sessions gives none and no
// error. Transcripts are read as FindSession reads them.
func (c *Claude) Sessions(dir string, limit int) ([]SessionInfo, error) {
	root, rel := c.configRoot()
	if root == "" {
		return nil, errors.New("list claude sessions: no HOME or CLAUDE_CONFIG_DIR to find them in")
	}
	folder := filepath.Join(rel, "projects", claudeProjectDir(dir))
	entries, err := os.ReadDir(filepath.Join(root, folder))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list claude sessions: %w", files.WithoutPath(err))
	}
	type candidate struct {
		id  string
		mod time.Time
	}
	var cands []candidate
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".jsonl")
		if !ok || !e.Type().IsRegular() || !isUUID(id) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		cands = append(cands, candidate{id, info.ModTime()})
	}
	// sort.SliceStable, not slices.SortFunc: each struct type given to the
	// generic sort compiles to ~12 KB of its own code.
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].mod.After(cands[j].mod) })
	var out []SessionInfo
	for _, cd := range cands {
		if len(out) >= limit {
			break
		}
		s, err := c.readSession(root, filepath.Join(folder, cd.id+".jsonl"))
		if err != nil {
			continue
		}
		s.ID, s.Dir = cd.id, dir
		out = append(out, s)
	}
	return out, nil
}

// FindSession finds the claude session id in any directory's folder of
// claude's projects, with the directory it was made in (the transcript's
// cwd, which must be the one its folder is named for) and its first
// prompt. An id that is not a UUID, or that no folder holds, returns
// ErrNoSession. The transcript is opened as the agent would open it, never
// through a link, and only its head is read.
func (c *Claude) FindSession(id string) (SessionInfo, error) {
	if !isUUID(id) {
		return SessionInfo{}, ErrNoSession
	}
	root, rel := c.configRoot()
	if root == "" {
		return SessionInfo{}, errors.New("find claude session: no HOME or CLAUDE_CONFIG_DIR to find it in")
	}
	projects := filepath.Join(rel, "projects")
	entries, err := os.ReadDir(filepath.Join(root, projects))
	if errors.Is(err, fs.ErrNotExist) {
		return SessionInfo{}, ErrNoSession
	}
	if err != nil {
		return SessionInfo{}, fmt.Errorf("find claude session: %w", files.WithoutPath(err))
	}
	var best SessionInfo
	found := false
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		s, err := c.readSession(root, filepath.Join(projects, e.Name(), id+".jsonl"))
		if err != nil || s.Dir == "" || claudeProjectDir(s.Dir) != e.Name() {
			continue
		}
		if !found || s.Modified.After(best.Modified) {
			best, found = s, true
		}
	}
	if !found {
		return SessionInfo{}, ErrNoSession
	}
	best.ID = id
	return best, nil
}

// readSession reads the head of the transcript at rel below root as the
// agent would (files.Guard: one folder at a time, never through a link).
func (c *Claude) readSession(root, rel string) (SessionInfo, error) {
	g := files.Guard{Agent: c.opts.credential()}
	f, err := g.Open(rel, root)
	if err != nil {
		return SessionInfo{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return SessionInfo{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, transcriptHeadSize))
	if err != nil {
		return SessionInfo{}, files.WithoutPath(err)
	}
	h := ParseClaudeTranscript(data)
	return SessionInfo{ID: h.SessionID, Dir: h.Dir, FirstPrompt: h.FirstPrompt, Modified: st.ModTime()}, nil
}
