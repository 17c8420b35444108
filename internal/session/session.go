// Package session keeps the binding from a channel to the agent session that
// continues its conversation (R6), persisted in CONFIG_DIR/sessions.json.
//
// Every change is written to disk at once with an atomic replace, so a
// restart (or a kill -9) finds the bindings as they were. A Store is safe for
// concurrent use.
//
// A shared Store (Share) keeps its records in a Remote that several
// machines use at once (docs/scale-out.md §4): reads go to the Remote,
// changes are written to it under revision checks, and sessions.json is the
// machine's local copy, read when the Remote cannot be.
package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// FileName is the store's file inside CONFIG_DIR.
const FileName = "sessions.json"

// Binding is what a channel remembers about its session.
type Binding struct {
	SessionID string `json:"session_id"`
	// Backend is the backend that created the session; a session of another
	// backend cannot be resumed.
	Backend string `json:"backend,omitempty"`
	// Persona holds a hash per system prompt section as the session last saw
	// it (DESIGN decision 5).
	Persona map[string]string `json:"persona,omitempty"`
	// SessionCostUSD is the session's running cost total as the CLI last
	// reported it, for CLIs that report totals rather than per-turn costs.
	SessionCostUSD float64 `json:"session_cost_usd,omitempty"`
	// WorkDir is the directory the CLI ran in when it last used the
	// session: claude keeps sessions per directory, so a session resumed
	// elsewhere must be moved there first.
	WorkDir string    `json:"work_dir,omitempty"`
	Updated time.Time `json:"updated"`
}

// Settings are what a channel's users chose for it (/project, /model,
// /system-prompt). They outlive its conversations: a reset keeps them.
type Settings struct {
	// Project is the absolute working directory of the channel's CLI runs;
	// empty means the gateway's default (WORK_DIR).
	Project string `json:"project,omitempty"`
	// Model overrides AGENT_MODEL in the channel.
	Model string `json:"model,omitempty"`
	// SystemPrompt is added to the system prompt in the channel.
	SystemPrompt string `json:"system_prompt,omitempty"`
}

// IsZero reports whether nothing is set.
func (s Settings) IsZero() bool { return s == Settings{} }

type file struct {
	Version  int                 `json:"version"`
	Channels map[string]Binding  `json:"channels"`
	Settings map[string]Settings `json:"settings,omitempty"`
	// Resets holds when a person last reset each channel's conversation.
	Resets map[string]time.Time `json:"resets,omitempty"`
}

// Store maps channel ids to bindings.
//
// Every change is on disk before Set or Delete returns. Concurrent changes
// share writes (group commit): a caller that finds its change already
// written by another caller's write returns without writing again, so a
// hundred channels starting sessions at once cost a few writes, not a
// hundred.
type Store struct {
	path string // empty: memory only
	now  func() time.Time

	mu       sync.Mutex // guards bindings, settings, resets, resetAt and version
	bindings map[string]Binding
	settings map[string]Settings
	// resets counts the Deletes and Drops of each key in this process: a
	// turn that began before one must not bind the key again when it ends.
	resets map[string]Epoch
	// resetAt is when a person last reset each key (Delete), kept in the
	// file: the conversation before it is over for good, also after a
	// restart (DESIGN decision 23).
	resetAt map[string]time.Time
	// version counts changes to bindings.
	version uint64

	// wmu serializes writes of the file and guards written.
	wmu sync.Mutex
	// written is the version the file holds.
	written uint64

	// remote, if set (Share), is the shared store the file is a local
	// copy of; report gets what goes wrong reading it. Both are set
	// before the store is used and never change.
	remote Remote
	report func(error)
}

// Open loads the store at path, or starts empty if the file does not exist.
// An empty path gives a store that lives in memory only. A file that cannot
// be parsed is moved aside (sessions.json.corrupt-<time>) and reported in
// the returned warning, so one bad file never stops the gateway.
func Open(path string) (s *Store, warning string, err error) {
	s = &Store{path: path, now: time.Now, bindings: map[string]Binding{}, settings: map[string]Settings{},
		resets: map[string]Epoch{}, resetAt: map[string]time.Time{}}
	if path == "" {
		return s, "", nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return s, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read session store: %w", err)
	}
	f, perr := parse(data)
	if perr != nil {
		aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.Rename(path, aside); err != nil {
			return nil, "", fmt.Errorf("move aside unreadable session store: %w", err)
		}
		return s, fmt.Sprintf("%s could not be read (%v); moved it to %s and started with no sessions", FileName, perr, aside), nil
	}
	s.bindings, s.settings, s.resetAt = f.Channels, f.Settings, f.Resets
	return s, "", nil
}

// parse reads the versioned format, and the flat {"channel":"session"} map
// of earlier gateways, into the current format with no nil maps.
func parse(data []byte) (file, error) {
	var f file
	if err := json.Unmarshal(data, &f); err == nil && f.Version >= 1 {
		f.Version = 1
		if f.Channels == nil {
			f.Channels = map[string]Binding{}
		}
		for ch, b := range f.Channels {
			if b.SessionID == "" {
				delete(f.Channels, ch)
			}
		}
		if f.Settings == nil {
			f.Settings = map[string]Settings{}
		}
		maps.DeleteFunc(f.Settings, func(_ string, s Settings) bool { return s.IsZero() })
		if f.Resets == nil {
			f.Resets = map[string]time.Time{}
		}
		maps.DeleteFunc(f.Resets, func(_ string, at time.Time) bool { return at.IsZero() })
		return f, nil
	}
	var flat map[string]string
	if err := json.Unmarshal(data, &flat); err != nil {
		return file{}, err
	}
	f = file{Version: 1, Channels: make(map[string]Binding, len(flat)), Settings: map[string]Settings{}, Resets: map[string]time.Time{}}
	for ch, id := range flat {
		if id != "" {
			f.Channels[ch] = Binding{SessionID: id}
		}
	}
	return f, nil
}

// Settings returns the channel's settings.
func (s *Store) Settings(channel string) Settings {
	if s.remote != nil {
		s.refreshSettings(channel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.settings[channel]
}

// UpdateSettings changes the channel's settings with change and saves the
// store; it returns the settings before and after. When the save fails the
// change stays in memory and the error says it is not on disk.
//
// In a shared store change may be called more than once, on the settings
// as another machine just changed them: it must only set what it changes.
func (s *Store) UpdateSettings(channel string, change func(*Settings)) (before, after Settings, err error) {
	if s.remote != nil {
		return s.sharedUpdateSettings(channel, change)
	}
	return s.localUpdateSettings(channel, change)
}

func (s *Store) localUpdateSettings(channel string, change func(*Settings)) (before, after Settings, err error) {
	s.mu.Lock()
	before = s.settings[channel]
	after = before
	change(&after)
	if after == before {
		s.mu.Unlock()
		return before, after, nil
	}
	if after.IsZero() {
		delete(s.settings, channel)
	} else {
		s.settings[channel] = after
	}
	s.version++
	v := s.version
	s.mu.Unlock()
	return before, after, s.save(v)
}

// Get returns the channel's binding.
func (s *Store) Get(channel string) (Binding, bool) {
	if s.remote != nil {
		s.refreshBinding(channel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bindings[channel]
	if ok {
		b.Persona = maps.Clone(b.Persona)
	}
	return b, ok
}

// Epoch identifies one conversation of a key: every Delete (a reset) or
// Drop begins a new one. In a shared store it is counted in the shared
// record, so a reset on one machine ends the conversation on all.
type Epoch uint64

// Current returns the channel's binding and the epoch of its conversation,
// for a later SetIn.
func (s *Store) Current(channel string) (Binding, bool, Epoch) {
	if s.remote != nil {
		s.refreshBinding(channel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bindings[channel]
	if ok {
		b.Persona = maps.Clone(b.Persona)
	}
	return b, ok, s.resets[channel]
}

// SetIn is Set for a turn that began in epoch: when the key was reset
// since, the reset wins and SetIn stores nothing and reports false.
func (s *Store) SetIn(channel string, epoch Epoch, b Binding) (bool, error) {
	if b.SessionID == "" {
		return false, errors.New("set session: empty session id")
	}
	if s.remote != nil {
		return s.sharedSetIn(channel, epoch, b)
	}
	return s.localSetIn(channel, epoch, b)
}

func (s *Store) localSetIn(channel string, epoch Epoch, b Binding) (bool, error) {
	s.mu.Lock()
	if s.resets[channel] != epoch {
		s.mu.Unlock()
		return false, nil
	}
	b.Persona = maps.Clone(b.Persona)
	s.bindings[channel] = b
	s.version++
	v := s.version
	s.mu.Unlock()
	return true, s.save(v)
}

// Set binds the channel to b and saves the store. When the save fails the
// binding stays in memory (the session keeps working) and the error says
// it is not on disk.
func (s *Store) Set(channel string, b Binding) error {
	if b.SessionID == "" {
		return errors.New("set session: empty session id")
	}
	if s.remote != nil {
		return s.sharedSet(channel, b)
	}
	return s.localSet(channel, b)
}

func (s *Store) localSet(channel string, b Binding) error {
	s.mu.Lock()
	b.Persona = maps.Clone(b.Persona)
	s.bindings[channel] = b
	s.version++
	v := s.version
	s.mu.Unlock()
	return s.save(v)
}

// Delete is a reset a person asked for (/claude-reset, the dashboard's
// Reset, a fresh /project): it removes the channel's binding, records when
// (ResetAt) and saves the store. It reports whether there was a binding.
// Either way the reset is recorded, since the archive may hold a
// conversation with no binding left, and a new epoch begins, so a turn
// still running in the old conversation cannot bind it again.
func (s *Store) Delete(channel string) (bool, error) {
	if s.remote != nil {
		return s.sharedForget(channel, true)
	}
	return s.localDelete(channel)
}

func (s *Store) localDelete(channel string) (bool, error) {
	s.mu.Lock()
	s.resets[channel]++
	_, had := s.bindings[channel]
	delete(s.bindings, channel)
	s.resetAt[channel] = s.now().UTC().Round(0)
	s.version++
	v := s.version
	s.mu.Unlock()
	return had, s.save(v)
}

// Drop removes the channel's binding because its session was lost without
// anyone asking (the CLI could not resume it, the retry ladder gave it up),
// and saves the store. It reports whether there was one. Unlike Delete it
// records no reset: the next session may be given the recent conversation.
// Either way it begins a new epoch, as Delete does.
func (s *Store) Drop(channel string) (bool, error) {
	if s.remote != nil {
		return s.sharedForget(channel, false)
	}
	return s.localDrop(channel)
}

func (s *Store) localDrop(channel string) (bool, error) {
	s.mu.Lock()
	s.resets[channel]++
	if _, had := s.bindings[channel]; !had {
		s.mu.Unlock()
		return false, nil
	}
	delete(s.bindings, channel)
	s.version++
	v := s.version
	s.mu.Unlock()
	return true, s.save(v)
}

// ResetAt returns when a person last reset the channel's conversation
// (Delete), or the zero time if never: nothing said before it belongs to
// the channel's current conversation.
func (s *Store) ResetAt(channel string) time.Time {
	if s.remote != nil {
		s.refreshResetAt(channel)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.resetAt[channel]
}

// Channels lists the bound channel ids, sorted.
func (s *Store) Channels() []string {
	if s.remote != nil {
		s.refreshChannels()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.bindings))
	for ch := range s.bindings {
		out = append(out, ch)
	}
	sort.Strings(out)
	return out
}

// save makes sure the file holds version v or a later one.
func (s *Store) save(v uint64) error {
	if s.path == "" {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.written >= v {
		return nil // a write for a later change carried this one
	}
	s.mu.Lock()
	data, err := json.MarshalIndent(file{Version: 1, Channels: s.bindings, Settings: s.settings, Resets: s.resetAt}, "", "  ")
	latest := s.version
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encode session store: %w", err)
	}
	if err := atomicfile.Write(s.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save session store: %w", err)
	}
	s.written = latest
	return nil
}
