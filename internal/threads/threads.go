// Package threads keeps the Discord threads the gateway opened for tasks
// (THREADS=auto, DESIGN decision 24): the channel each came from, who
// asked, its name, and when it was last used, in CONFIG_DIR/threads.json.
//
// In a thread listed here every message from an allowed user is a prompt,
// and a worktree belongs to its thread (internal/worktree). A Store is safe
// for concurrent use; every change is on disk before it returns.
package threads

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// FileName is the store's file inside CONFIG_DIR.
const FileName = "threads.json"

// Thread is a thread the gateway opened.
type Thread struct {
	// ID is the thread's channel id; a thread opened on a prompt's message
	// has that message's id.
	ID string `json:"id"`
	// Parent is the text channel the thread was opened in.
	Parent string `json:"parent"`
	Guild  string `json:"guild,omitempty"`
	// Author is the user whose prompt opened it: with the approvers, the
	// one who may merge or discard its work.
	Author  string    `json:"author,omitempty"`
	Name    string    `json:"name,omitempty"`
	Created time.Time `json:"created"`
	// LastUsed is when a turn last ran in it.
	LastUsed time.Time `json:"last_used,omitempty"`
	// Gone is set once Discord says the thread was deleted.
	Gone bool `json:"gone,omitempty"`
}

type file struct {
	Version int               `json:"version"`
	Threads map[string]Thread `json:"threads"`
}

// Store is the set of the gateway's threads.
type Store struct {
	path string // empty: memory only

	mu      sync.Mutex
	threads map[string]Thread
}

// Open loads the store at path, or starts empty when there is none. An
// empty path keeps the store in memory. A file that cannot be parsed is
// moved aside and reported in the warning: the threads still work, as
// threads others made (a mention is needed in them) until they are used.
func Open(path string) (s *Store, warning string, err error) {
	s = &Store{path: path, threads: map[string]Thread{}}
	if path == "" {
		return s, "", nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read the thread list: %w", err)
	}
	var f file
	if perr := json.Unmarshal(data, &f); perr != nil || f.Version < 1 {
		if perr == nil {
			perr = errors.New("no version")
		}
		aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, aside); err != nil {
			return nil, "", fmt.Errorf("move aside an unreadable thread list: %w", err)
		}
		return s, fmt.Sprintf("%s could not be read (%v); moved it to %s and started with no threads", FileName, perr, aside), nil
	}
	for id, t := range f.Threads {
		if id == "" || t.ID != id {
			continue
		}
		s.threads[id] = t
	}
	return s, "", nil
}

// Add records a thread the gateway opened. It reports false, and changes
// nothing, when the thread is known already: a thread is created once,
// and what it inherited then stays.
func (s *Store) Add(t Thread) (bool, error) {
	if t.ID == "" || t.Parent == "" {
		return false, errors.New("a thread needs its id and its channel")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.threads[t.ID]; ok {
		return false, nil
	}
	s.threads[t.ID] = t
	if err := s.saveLocked(); err != nil {
		delete(s.threads, t.ID)
		return false, err
	}
	return true, nil
}

// Get returns the thread with id, if the gateway opened it.
func (s *Store) Get(id string) (Thread, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[id]
	return t, ok
}

// Owns reports whether the gateway opened the thread id.
func (s *Store) Owns(id string) bool {
	_, ok := s.Get(id)
	return ok
}

// Touch records that a turn ran in the thread at t.
func (s *Store) Touch(id string, at time.Time) error {
	return s.update(id, func(t *Thread) { t.LastUsed = at })
}

// MarkGone records that Discord deleted the thread.
func (s *Store) MarkGone(id string) error {
	return s.update(id, func(t *Thread) { t.Gone = true })
}

// Remove forgets the thread.
func (s *Store) Remove(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[id]
	if !ok {
		return nil
	}
	delete(s.threads, id)
	if err := s.saveLocked(); err != nil {
		s.threads[id] = t
		return err
	}
	return nil
}

// Prune forgets the threads last used (or, never used, opened) before
// before, except those keep asks to keep (a worktree still holds their
// work), and reports how many it forgot. In a forgotten thread the bot
// answers when mentioned, as in any thread, and its session and settings
// stay in sessions.json. The list stays small, and so does every rewrite
// of it.
func (s *Store) Prune(before time.Time, keep func(id string) bool) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gone []Thread
	for id, t := range s.threads {
		last := t.LastUsed
		if last.IsZero() {
			last = t.Created
		}
		if last.Before(before) && (keep == nil || !keep(id)) {
			gone = append(gone, t)
			delete(s.threads, id)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if err := s.saveLocked(); err != nil {
		for _, t := range gone {
			s.threads[t.ID] = t
		}
		return 0, err
	}
	return len(gone), nil
}

func (s *Store) update(id string, change func(*Thread)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.threads[id]
	if !ok {
		return nil
	}
	before := t
	change(&t)
	if t == before {
		return nil
	}
	s.threads[id] = t
	if err := s.saveLocked(); err != nil {
		s.threads[id] = before
		return err
	}
	return nil
}

// List returns every thread, oldest first.
func (s *Store) List() []Thread {
	s.mu.Lock()
	out := make([]Thread, 0, len(s.threads))
	for _, t := range s.threads {
		out = append(out, t)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Created.Equal(out[j].Created) {
			return out[i].Created.Before(out[j].Created)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (s *Store) saveLocked() error {
	if s.path == "" {
		return nil
	}
	data, err := json.MarshalIndent(file{Version: 1, Threads: s.threads}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the thread list: %w", err)
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("write the thread list: %w", err)
	}
	return nil
}
