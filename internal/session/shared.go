package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"
)

// Kinds of the records a Remote keeps per channel: the binding and the
// settings are separate records, so a /model on one machine never undoes a
// turn's binding written on another, nor the other way round.
const (
	KindBinding  = "sess"
	KindSettings = "set"
	KindReset    = "reset"
)

// Record is one record of a Remote: its value and revision. A record that
// does not exist has revision 0 and no value.
type Record struct {
	Value    []byte
	Revision uint64
}

// Remote is where a shared Store keeps its records, so that every machine
// running a channel's turns sees the same binding and settings (a
// JetStream key-value bucket: internal/kvstate). Each call is bounded by
// the Remote's own timeout.
type Remote interface {
	// Get returns the record of kind for channel.
	Get(ctx context.Context, kind, channel string) (Record, error)
	// Update writes value if the record's revision is still revision (0:
	// the record must not exist). ok is false, with no error, when it
	// was not: someone else wrote first.
	Update(ctx context.Context, kind, channel string, value []byte, revision uint64) (newRevision uint64, ok bool, err error)
	// List returns every record of kind, by channel.
	List(ctx context.Context, kind string) (map[string]Record, error)
}

// conversation is the record of KindBinding: the binding, if any, and the
// count of resets and drops, which is the channel's Epoch on every machine.
// A reset writes a record without a binding and a new epoch, so the record's
// revision moves and a turn's write checked against it fails (the reset
// wins), and so does every later SetIn of that turn, which checks the
// epoch.
type conversation struct {
	Binding *Binding `json:"binding,omitempty"`
	Epoch   Epoch    `json:"epoch,omitempty"`
}

// maxConflicts bounds the retries of a write that found its record changed
// since it was read; only writers of the same channel collide.
const maxConflicts = 16

// errTooBusy is the error of a write that lost maxConflicts races in a row.
var errTooBusy = errors.New("the record kept changing under this write")

// Share makes the store shared: every read goes to r first and every change
// is written to r, with the store's file kept as a local copy. When r
// cannot be read, reads give the local copy and the error is passed to
// report; when r cannot be written, the change is kept in the local copy
// and returned as the error. Share puts the store's own bindings, settings
// and reset times in r where r has none (a machine that ran alone before
// hands over its channels), reporting the first failure. Call it once,
// before the store is used; report may be nil.
func (s *Store) Share(r Remote, report func(error)) {
	if report == nil {
		report = func(error) {}
	}
	s.remote, s.report = r, report
	s.mu.Lock()
	type seed struct {
		kind, channel string
		value         []byte
	}
	var seeds []seed
	for ch, b := range s.bindings {
		seeds = append(seeds, seed{KindBinding, ch, mustJSON(conversation{Binding: &b})})
	}
	for ch, set := range s.settings {
		seeds = append(seeds, seed{KindSettings, ch, mustJSON(set)})
	}
	for ch, at := range s.resetAt {
		seeds = append(seeds, seed{KindReset, ch, mustJSON(at)})
	}
	s.mu.Unlock()
	for _, sd := range seeds {
		if _, _, err := r.Update(context.Background(), sd.kind, sd.channel, sd.value, 0); err != nil {
			report(fmt.Errorf("share the session store: %w", err))
			return
		}
	}
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the store's own plain types are encoded
	}
	return data
}

// readConversation reads channel's binding record from the remote and
// makes the local copy match it. An unreadable record is reported and
// read as none: the next write replaces it.
func (s *Store) readConversation(channel string) (conversation, uint64, error) {
	rec, err := s.remote.Get(context.Background(), KindBinding, channel)
	if err != nil {
		return conversation{}, 0, err
	}
	var c conversation
	if len(rec.Value) > 0 {
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			s.report(fmt.Errorf("read the session binding of %s: %w", channel, err))
			c = conversation{}
		}
	}
	if c.Binding != nil && c.Binding.SessionID == "" {
		c.Binding = nil
	}
	s.cacheConversation(channel, c)
	return c, rec.Revision, nil
}

// cacheConversation makes the local copy of channel's binding and epoch c,
// saving the file when the binding changed.
func (s *Store) cacheConversation(channel string, c conversation) {
	s.mu.Lock()
	s.resets[channel] = c.Epoch
	old, had := s.bindings[channel]
	var changed bool
	switch {
	case c.Binding == nil:
		changed = had
		delete(s.bindings, channel)
	default:
		changed = !had || !sameBinding(old, *c.Binding)
		b := *c.Binding
		b.Persona = maps.Clone(b.Persona)
		s.bindings[channel] = b
	}
	s.saveChangeLocked(changed)
}

// saveChangeLocked ends a change of the local copy made under s.mu:
// unlocks, and saves the file when changed, reporting a failure.
func (s *Store) saveChangeLocked(changed bool) {
	if !changed {
		s.mu.Unlock()
		return
	}
	s.version++
	v := s.version
	s.mu.Unlock()
	if err := s.save(v); err != nil {
		s.report(err)
	}
}

func sameBinding(a, b Binding) bool {
	return a.SessionID == b.SessionID && a.Backend == b.Backend && maps.Equal(a.Persona, b.Persona) &&
		a.SessionCostUSD == b.SessionCostUSD && a.WorkDir == b.WorkDir && a.Updated.Equal(b.Updated)
}

// refreshBinding brings the local copy of channel's binding up to date
// from the remote, reporting when it cannot.
func (s *Store) refreshBinding(channel string) {
	if _, _, err := s.readConversation(channel); err != nil {
		s.report(fmt.Errorf("read the session binding (using this machine's copy): %w", err))
	}
}

// readSettings reads channel's settings from the remote into the local
// copy.
func (s *Store) readSettings(channel string) (Settings, uint64, error) {
	rec, err := s.remote.Get(context.Background(), KindSettings, channel)
	if err != nil {
		return Settings{}, 0, err
	}
	var set Settings
	if len(rec.Value) > 0 {
		if err := json.Unmarshal(rec.Value, &set); err != nil {
			s.report(fmt.Errorf("read the settings of %s: %w", channel, err))
			set = Settings{}
		}
	}
	s.mu.Lock()
	changed := s.settings[channel] != set
	if set.IsZero() {
		delete(s.settings, channel)
	} else {
		s.settings[channel] = set
	}
	s.saveChangeLocked(changed)
	return set, rec.Revision, nil
}

func (s *Store) refreshSettings(channel string) {
	if _, _, err := s.readSettings(channel); err != nil {
		s.report(fmt.Errorf("read the channel settings (using this machine's copy): %w", err))
	}
}

// readResetAt reads when channel was last reset into the local copy.
func (s *Store) readResetAt(channel string) (time.Time, uint64, error) {
	rec, err := s.remote.Get(context.Background(), KindReset, channel)
	if err != nil {
		return time.Time{}, 0, err
	}
	var at time.Time
	if len(rec.Value) > 0 {
		if err := json.Unmarshal(rec.Value, &at); err != nil {
			s.report(fmt.Errorf("read the reset time of %s: %w", channel, err))
			at = time.Time{}
		}
	}
	s.mu.Lock()
	changed := !s.resetAt[channel].Equal(at)
	if at.IsZero() {
		delete(s.resetAt, channel)
	} else {
		s.resetAt[channel] = at
	}
	s.saveChangeLocked(changed)
	return at, rec.Revision, nil
}

func (s *Store) refreshResetAt(channel string) {
	if _, _, err := s.readResetAt(channel); err != nil {
		s.report(fmt.Errorf("read the reset time (using this machine's copy): %w", err))
	}
}

// refreshChannels makes the local copy's bindings those of the remote.
func (s *Store) refreshChannels() {
	recs, err := s.remote.List(context.Background(), KindBinding)
	if err != nil {
		s.report(fmt.Errorf("list the session bindings (using this machine's copy): %w", err))
		return
	}
	for ch := range s.localChannels() {
		if _, ok := recs[ch]; !ok {
			s.cacheConversation(ch, conversation{})
		}
	}
	for ch, rec := range recs {
		var c conversation
		if err := json.Unmarshal(rec.Value, &c); err != nil {
			s.report(fmt.Errorf("read the session binding of %s: %w", ch, err))
			continue
		}
		if c.Binding != nil && c.Binding.SessionID == "" {
			c.Binding = nil
		}
		s.cacheConversation(ch, c)
	}
}

func (s *Store) localChannels() map[string]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]bool, len(s.bindings))
	for ch := range s.bindings {
		out[ch] = true
	}
	return out
}

// changeConversation writes channel's binding record as change makes it
// from the current one, retrying when another machine wrote first. change
// returns false to write nothing. The local copy follows what was written.
func (s *Store) changeConversation(channel string, change func(*conversation) bool) (wrote bool, err error) {
	for range maxConflicts {
		c, rev, err := s.readConversation(channel)
		if err != nil {
			return false, err
		}
		if !change(&c) {
			return false, nil
		}
		if _, ok, err := s.remote.Update(context.Background(), KindBinding, channel, mustJSON(c), rev); err != nil {
			return false, err
		} else if ok {
			s.cacheConversation(channel, c)
			return true, nil
		}
	}
	return false, errTooBusy
}

// sharedSetIn is SetIn on the remote: the epoch is checked against the
// record's, and the write against the revision read with it.
func (s *Store) sharedSetIn(channel string, epoch Epoch, b Binding) (bool, error) {
	b.Persona = maps.Clone(b.Persona)
	wrote, err := s.changeConversation(channel, func(c *conversation) bool {
		if c.Epoch != epoch {
			return false
		}
		c.Binding = &b
		return true
	})
	if err != nil {
		stored, lerr := s.localSetIn(channel, epoch, b)
		return stored, errors.Join(fmt.Errorf("share session binding: %w", err), lerr)
	}
	return wrote, s.savedErr()
}

func (s *Store) sharedSet(channel string, b Binding) error {
	b.Persona = maps.Clone(b.Persona)
	_, err := s.changeConversation(channel, func(c *conversation) bool {
		c.Binding = &b
		return true
	})
	if err != nil {
		return errors.Join(fmt.Errorf("share session binding: %w", err), s.localSet(channel, b))
	}
	return s.savedErr()
}

// sharedForget ends channel's conversation on the remote (a reset or a
// drop): no binding and a new epoch. A reset also records when.
func (s *Store) sharedForget(channel string, reset bool) (bool, error) {
	var had bool
	_, err := s.changeConversation(channel, func(c *conversation) bool {
		had = c.Binding != nil
		*c = conversation{Epoch: c.Epoch + 1}
		return true
	})
	if err == nil && reset {
		err = s.writeResetAt(channel, s.now().UTC().Round(0))
	}
	if err != nil {
		var lhad bool
		var lerr error
		if reset {
			lhad, lerr = s.localDelete(channel)
		} else {
			lhad, lerr = s.localDrop(channel)
		}
		return lhad, errors.Join(fmt.Errorf("share session reset: %w", err), lerr)
	}
	return had, s.savedErr()
}

func (s *Store) writeResetAt(channel string, at time.Time) error {
	for range maxConflicts {
		_, rev, err := s.readResetAt(channel)
		if err != nil {
			return err
		}
		if _, ok, err := s.remote.Update(context.Background(), KindReset, channel, mustJSON(at), rev); err != nil {
			return err
		} else if ok {
			s.mu.Lock()
			s.resetAt[channel] = at
			s.saveChangeLocked(true)
			return nil
		}
	}
	return errTooBusy
}

func (s *Store) sharedUpdateSettings(channel string, change func(*Settings)) (before, after Settings, err error) {
	for range maxConflicts {
		cur, rev, rerr := s.readSettings(channel)
		if rerr != nil {
			err = rerr
			break
		}
		before, after = cur, cur
		change(&after)
		if after == before {
			return before, after, nil
		}
		_, ok, werr := s.remote.Update(context.Background(), KindSettings, channel, mustJSON(after), rev)
		if werr != nil {
			err = werr
			break
		}
		if ok {
			s.mu.Lock()
			if after.IsZero() {
				delete(s.settings, channel)
			} else {
				s.settings[channel] = after
			}
			s.saveChangeLocked(true)
			return before, after, s.savedErr()
		}
		err = errTooBusy
	}
	before, after, lerr := s.localUpdateSettings(channel, change)
	return before, after, errors.Join(fmt.Errorf("share channel settings: %w", err), lerr)
}

// savedErr reports whether the local copy is on disk: the shared writes
// report a failed save as they go, and the caller of a change also learns
// of it, as without a remote.
func (s *Store) savedErr() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	v := s.version
	s.mu.Unlock()
	return s.save(v)
}
