// Package archive keeps every exchange of the gateway (a prompt and its
// reply) per Discord channel, as markdown an operator can read or grep:
// CONFIG_DIR/conversations/<channel id>/<YYYY-MM-DD>.md, one file a day.
// It also keeps the last few exchanges of each channel in
// <channel id>/recent.json, so that a channel whose agent session was
// reset can hand the agent the recent context (see RecentSection).
//
// An entry reaches its day file in a single append, so a crash leaves at
// most a torn last entry, and the next one starts on a line of its own.
// recent.json is replaced whole after each Append, or at most once per
// Options.SaveRecentEvery per channel while exchanges keep coming. Nothing
// reads the markdown back: it is for people.
//
// Neither is fsync'd: they survive the gateway's crash (the kernel has
// the writes), and a crash of the machine may lose their last seconds.
// The inbox, which is fsync'd, is what a restart relies on; syncing each
// exchange here would spend the disk's sync rate, which the inbox's
// intake waits on, on a record for people.
//
// An Archive is safe for concurrent use: appends to different channels run
// in parallel, appends to one channel one after the other.
package archive

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// DefaultKeep is how many recent exchanges per channel a configuration
// should keep unless told otherwise.
const DefaultKeep = 20

// SystemDir is the directory of the entries that belong to no channel.
const SystemDir = "system"

// RecentFile is the name of the file, in each channel's directory, that
// holds the last exchanges.
const RecentFile = "recent.json"

// maxText is how much of a prompt or a reply recent.json keeps, in bytes.
const maxText = 4000

// ErrInvalidChannel is returned for a channel id that cannot name a
// directory of its own.
var ErrInvalidChannel = errors.New("invalid channel id")

// Entry is one exchange: a prompt and its reply.
type Entry struct {
	// Time is when the turn finished; zero is the time of Append.
	Time      time.Time `json:"time"`
	ChannelID string    `json:"channel_id,omitempty"`
	EventID   uint64    `json:"event_id,omitempty"`
	// Kind is "message", "heartbeat", "cron", "hook" or "webhook".
	Kind string `json:"kind,omitempty"`
	// Name is the heartbeat's, cron job's, hook's or webhook's; "" for a
	// message.
	Name string `json:"name,omitempty"`
	// Author is the display name of who wrote the prompt, if known.
	Author string `json:"author,omitempty"`
	UserID string `json:"user_id,omitempty"`
	Prompt string `json:"prompt,omitempty"`
	Reply  string `json:"reply,omitempty"`
	// Tools are the names of the tools the agent used, in order, repeats
	// included.
	Tools   []string `json:"tools,omitempty"`
	CostUSD float64  `json:"cost_usd,omitempty"`
	// Estimate is set when CostUSD is an estimate.
	Estimate bool `json:"estimate,omitempty"`
	// Outcome is "ok", "error", "stopped", ...
	Outcome  string        `json:"outcome,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Attachments are the names of the files attached to the prompt.
	Attachments []string `json:"attachments,omitempty"`
	// Files are the names of the files sent with the reply.
	Files []string `json:"files,omitempty"`
	// Origin and N name an exchange another process of a gateway on NATS
	// recorded (see Share): that process's id and its number for it.
	Origin string `json:"origin,omitempty"`
	N      uint64 `json:"n,omitempty"`
}

// clone copies e deeply enough that neither copy's change shows in the
// other.
func (e Entry) clone() Entry {
	e.Tools = slices.Clone(e.Tools)
	e.Attachments = slices.Clone(e.Attachments)
	e.Files = slices.Clone(e.Files)
	return e
}

// valid returns e with its text made valid UTF-8, as JSON would make it:
// what Recent returns is then the same before and after a restart.
func (e Entry) valid() Entry {
	e = e.clone()
	fix := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
	e.ChannelID, e.Kind, e.Name, e.Author, e.UserID = fix(e.ChannelID), fix(e.Kind), fix(e.Name), fix(e.Author), fix(e.UserID)
	e.Prompt, e.Reply, e.Outcome = fix(e.Prompt), fix(e.Reply), fix(e.Outcome)
	for _, list := range [][]string{e.Tools, e.Attachments, e.Files} {
		for i, s := range list {
			list[i] = fix(s)
		}
	}
	return e
}

// Options configure an Archive.
type Options struct {
	// Dir holds the archive: CONFIG_DIR/conversations.
	Dir string
	// Keep is how many recent exchanges per channel Recent returns; 0
	// keeps none (and writes no recent.json). See DefaultKeep.
	Keep int
	// Days is how many days of day files to keep; 0 keeps them forever.
	Days int
	// Location is where the dates of the day files and the times of the
	// headings are; nil is time.Local.
	Location *time.Location
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// SaveRecentEvery, if set, is the least time between two writes of
	// one channel's recent.json while exchanges keep coming: the exchanges
	// in between are written by SaveRecent, which runs within that time
	// (and which a writer may call when it is idle). Zero writes it at
	// every Append.
	SaveRecentEvery time.Duration
}

// Archive writes the day files and keeps the recent exchanges.
type Archive struct {
	dir  string
	keep int
	days int
	loc  *time.Location
	now  func() time.Time
	log  zerolog.Logger
	// saveEvery is Options.SaveRecentEvery.
	saveEvery time.Duration

	mu        sync.Mutex          // guards the fields below
	channels  map[string]*channel // by directory name
	lastPrune string              // the day Append last pruned, in loc
	saving    bool                // a SaveRecent is due (saveLater)

	pruneMu sync.Mutex // one Prune at a time

	share shared // the shared mode
}

// channel is one channel's directory.
type channel struct {
	mu sync.Mutex // held by an append to the channel; guards the fields below
	// recent is the last exchanges, oldest first, once loaded.
	recent []Entry
	loaded bool
	// savedAt is when recent.json was last written; dirty marks recent
	// ahead of it (SaveRecent writes it).
	savedAt time.Time
	dirty   bool
}

// Open prepares the archive in opts.Dir, creating the directory.
func Open(opts Options, log zerolog.Logger) (*Archive, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("open the conversation archive: no directory")
	case opts.Keep < 0:
		return nil, fmt.Errorf("open the conversation archive: keep %d is negative", opts.Keep)
	case opts.Days < 0:
		return nil, fmt.Errorf("open the conversation archive: days %d is negative", opts.Days)
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("open the conversation archive: %w", err)
	}
	a := &Archive{
		dir:       opts.Dir,
		keep:      opts.Keep,
		days:      opts.Days,
		loc:       opts.Location,
		now:       opts.Now,
		saveEvery: opts.SaveRecentEvery,
		log:       log.With().Str("component", "archive").Logger(),
		channels:  map[string]*channel{},
	}
	if a.loc == nil {
		a.loc = time.Local
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a, nil
}

// dirName is the directory of a channel's entries: the id itself, or
// SystemDir for "". Snowflakes are digits; an id is refused unless it is
// letters, digits, "-" and "_" (so it cannot step out of the archive or
// hide), and it may not be SystemDir.
func dirName(channelID string) (string, error) {
	if channelID == "" {
		return SystemDir, nil
	}
	if channelID == SystemDir || len(channelID) > 64 ||
		strings.ContainsFunc(channelID, func(r rune) bool {
			return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_')
		}) {
		return "", fmt.Errorf("%w: %q", ErrInvalidChannel, channelID)
	}
	return channelID, nil
}

func (a *Archive) channel(name string) *channel {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := a.channels[name]
	if ch == nil {
		ch = &channel{}
		a.channels[name] = ch
	}
	return ch
}

// Append archives the entries: it appends each to its day file, adds it to
// its channel's recent exchanges and, once a day, prunes old day files (a
// failure of which is logged, not returned). Entries given together are
// written together: one append and one sync per day file, one rewrite of
// each channel's recent.json, in the order given; a writer that takes
// what piled up behind the turns then pays per channel, not per entry. An
// entry with an invalid channel id is left out and the others written. An
// error means some entries may be missing from their day file or
// recent.json; errors are joined and wrapped.
//
// In the shared mode (Share) each entry is then numbered, kept in the
// journal and handed to the other processes.
func (a *Archive) Append(entries ...Entry) error {
	var errs []error
	var order []string // channel directories, in the order of their first entry
	byChannel := map[string][]Entry{}
	var written []Entry
	for _, e := range entries {
		name, err := dirName(e.ChannelID)
		if err != nil {
			errs = append(errs, fmt.Errorf("archive an exchange: %w", err))
			continue
		}
		if e.Time.IsZero() {
			e.Time = a.now()
		}
		e.Time = e.Time.Round(0) // as it comes back from recent.json
		if math.IsNaN(e.CostUSD) || math.IsInf(e.CostUSD, 0) {
			e.CostUSD = 0 // JSON has no such numbers
		}
		if _, ok := byChannel[name]; !ok {
			order = append(order, name)
		}
		byChannel[name] = append(byChannel[name], e)
		written = append(written, e)
	}
	for _, name := range order {
		errs = append(errs, a.write(name, byChannel[name], false))
	}
	for _, e := range written {
		a.publish(e)
	}
	a.maybePrune()
	return errors.Join(errs...)
}

// write appends the entries of one channel to their day files and to the
// channel's recent exchanges: at the end, or in time order for exchanges
// of another process, which may arrive after a later one recorded here.
// One of another process already among the recent ones (a restart after
// its write and before its journal line) is not written again.
func (a *Archive) write(name string, entries []Entry, inOrder bool) error {
	ch := a.channel(name)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	entries = slices.DeleteFunc(slices.Clone(entries), func(e Entry) bool {
		if e.Origin == "" || a.keep == 0 {
			return false
		}
		a.load(ch, name)
		return slices.ContainsFunc(ch.recent, func(r Entry) bool { return r.Origin == e.Origin && r.N == e.N })
	})
	if len(entries) == 0 {
		return nil
	}
	dayErr := a.appendDays(name, entries)
	recentErr := a.remember(ch, name, entries, inOrder)
	return errors.Join(dayErr, recentErr)
}

// appendDays appends the entries of one channel to their day files, each
// day file's share in one write.
func (a *Archive) appendDays(name string, entries []Entry) error {
	dir := filepath.Join(a.dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("archive an exchange: %w", err)
	}
	var days []string
	byDay := map[string][]Entry{}
	for _, e := range entries {
		day := e.Time.In(a.loc).Format(time.DateOnly)
		if _, ok := byDay[day]; !ok {
			days = append(days, day)
		}
		byDay[day] = append(byDay[day], e)
	}
	var errs []error
	for _, day := range days {
		errs = append(errs, a.appendDay(dir, name, day, byDay[day]))
	}
	return errors.Join(errs...)
}

// appendDay appends entries to the day file of day in dir.
func (a *Archive) appendDay(dir, name, day string, entries []Entry) error {
	path := filepath.Join(dir, day+".md")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("archive an exchange: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("archive an exchange: %w", err)
	}
	var buf strings.Builder
	switch {
	case st.Size() == 0:
		buf.WriteString(dayHeader(name, day) + "\n")
	case endsTorn(f, st.Size()):
		// A crash tore the last entry: end its line, or this entry's
		// heading would be glued to it.
		buf.WriteString("\n\n")
	default:
		buf.WriteString("\n")
	}
	for i, e := range entries {
		if i > 0 {
			buf.WriteString("\n")
		}
		buf.WriteString(render(e, a.loc))
	}
	// One write(2) on an O_APPEND file: the entries land whole after
	// whatever is there, never interleaved with another writer's.
	if _, err := f.WriteString(buf.String()); err != nil {
		return fmt.Errorf("archive an exchange in %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("archive an exchange in %s: %w", path, err)
	}
	return nil
}

// endsTorn reports whether the file of the given size does not end with a
// newline.
func endsTorn(f *os.File, size int64) bool {
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return true
	}
	return last[0] != '\n'
}

// remember adds the entries to the channel's recent exchanges and
// rewrites its recent.json once; ch.mu must be held.
func (a *Archive) remember(ch *channel, name string, entries []Entry, inOrder bool) error {
	if a.keep == 0 {
		return nil
	}
	a.load(ch, name)
	var errs []error
	added := false
	for _, e := range entries {
		e = remembered(e)
		// An entry JSON cannot hold (a year past 9999) must not stay in
		// memory, where it would fail every later write of the file.
		if _, err := json.Marshal(e); err != nil {
			errs = append(errs, fmt.Errorf("remember an exchange: %w", err))
			continue
		}
		at := len(ch.recent)
		if inOrder {
			for at > 0 && ch.recent[at-1].Time.After(e.Time) {
				at--
			}
		}
		ch.recent = slices.Insert(ch.recent, at, e)
		if n := len(ch.recent) - a.keep; n > 0 {
			ch.recent = slices.Delete(ch.recent, 0, n)
		}
		added = true
	}
	if !added {
		return errors.Join(errs...)
	}
	ch.dirty = true
	if now := a.now(); a.saveEvery == 0 || now.Sub(ch.savedAt) >= a.saveEvery || now.Before(ch.savedAt) {
		errs = append(errs, a.saveRecent(ch, name))
	} else {
		a.saveLater()
	}
	return errors.Join(errs...)
}

// saveLater makes sure SaveRecent runs within saveEvery.
func (a *Archive) saveLater() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saving {
		return
	}
	a.saving = true
	time.AfterFunc(a.saveEvery, func() {
		a.mu.Lock()
		a.saving = false
		a.mu.Unlock()
		if err := a.SaveRecent(); err != nil {
			a.log.Error().Err(err).Msg("recent exchanges not saved")
		}
	})
}

// saveRecent writes the channel's recent.json; ch.mu must be held.
func (a *Archive) saveRecent(ch *channel, name string) error {
	data, err := json.Marshal(ch.recent)
	if err != nil {
		return fmt.Errorf("remember an exchange: %w", err)
	}
	if err := atomicfile.Replace(filepath.Join(a.dir, name, RecentFile), data, 0o600); err != nil {
		return fmt.Errorf("remember an exchange: %w", err)
	}
	ch.dirty, ch.savedAt = false, a.now()
	return nil
}

// SaveRecent writes the recent.json of every channel whose recent
// exchanges changed since it was last written (see
// Options.SaveRecentEvery).
func (a *Archive) SaveRecent() error {
	a.mu.Lock()
	names := make([]string, 0, len(a.channels))
	for name := range a.channels {
		names = append(names, name)
	}
	a.mu.Unlock()
	var errs []error
	for _, name := range names {
		ch := a.channel(name)
		ch.mu.Lock()
		if ch.dirty {
			errs = append(errs, a.saveRecent(ch, name))
		}
		ch.mu.Unlock()
	}
	return errors.Join(errs...)
}

// remembered is e as recent.json keeps it: valid UTF-8, the prompt and the
// reply cut to maxText.
func remembered(e Entry) Entry {
	e = e.valid()
	e.Prompt = clip(e.Prompt, maxText)
	e.Reply = clip(e.Reply, maxText)
	return e
}

// load reads the channel's recent.json the first time it is needed; ch.mu
// must be held. A file that cannot be read is logged and counts as empty:
// it is a convenience, and the next Append replaces it.
func (a *Archive) load(ch *channel, name string) {
	if ch.loaded {
		return
	}
	ch.loaded = true
	path := filepath.Join(a.dir, name, RecentFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil {
		err = json.Unmarshal(data, &ch.recent)
	}
	if err != nil {
		ch.recent = nil
		a.log.Warn().Err(err).Str("channel", name).Msg("recent exchanges unreadable; starting afresh")
		return
	}
	if n := len(ch.recent) - a.keep; n > 0 {
		ch.recent = slices.Delete(ch.recent, 0, n)
	}
}

// Recent returns the last exchanges of the channel ("" for the system
// directory), oldest first, at most Options.Keep; prompts and replies
// are cut to a few thousand bytes. An invalid channel id has none.
func (a *Archive) Recent(channelID string) []Entry {
	name, err := dirName(channelID)
	if err != nil || a.keep == 0 {
		return nil
	}
	ch := a.channel(name)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	a.load(ch, name)
	out := make([]Entry, len(ch.recent))
	for i, e := range ch.recent {
		out[i] = e.clone()
	}
	return out
}

// clip cuts s to at most n bytes at a rune boundary, marking the cut
// with "…".
func clip(s string, n int) string {
	const mark = "…"
	if len(s) <= n {
		return s
	}
	if n < len(mark) {
		return ""
	}
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// maybePrune prunes once per day (in loc), so that a long-running gateway
// keeps to Options.Days without a timer of its own.
func (a *Archive) maybePrune() {
	if a.days == 0 {
		return
	}
	today := a.now().In(a.loc).Format(time.DateOnly)
	a.mu.Lock()
	due := a.lastPrune != today
	a.lastPrune = today
	a.mu.Unlock()
	if !due {
		return
	}
	n, err := a.Prune()
	if err != nil {
		a.log.Warn().Err(err).Int("removed", n).Msg("prune the conversation archive")
	} else if n > 0 {
		a.log.Info().Int("removed", n).Int("days", a.days).Msg("pruned the conversation archive")
	}
}

// Prune removes the day files more than Options.Days days old, judged by
// the date in their name against today in Options.Location: with Days 1,
// today's and yesterday's stay. Other files (recent.json) are left alone,
// and so are the channel directories. It returns how many files it
// removed; errors are joined, and do not stop it.
func (a *Archive) Prune() (removed int, err error) {
	if a.days == 0 {
		return 0, nil
	}
	a.pruneMu.Lock()
	defer a.pruneMu.Unlock()
	y, m, d := a.now().In(a.loc).Date()
	oldest := time.Date(y, m, d-a.days, 0, 0, 0, 0, a.loc).Format(time.DateOnly)

	dirs, err := os.ReadDir(a.dir)
	if err != nil {
		return 0, fmt.Errorf("prune the conversation archive: %w", err)
	}
	var errs []error
	for _, dir := range dirs {
		if !dir.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(a.dir, dir.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("prune the conversation archive: %w", err))
			continue
		}
		for _, f := range files {
			day, ok := dayOf(f.Name())
			if !ok || f.IsDir() || day >= oldest {
				continue
			}
			if err := os.Remove(filepath.Join(a.dir, dir.Name(), f.Name())); err != nil {
				errs = append(errs, fmt.Errorf("prune the conversation archive: %w", err))
				continue
			}
			removed++
		}
	}
	return removed, errors.Join(errs...)
}

// dayOf is the date a day file is named after: "2026-11-25" for
// "2026-11-25.md".
func dayOf(name string) (string, bool) {
	day, ok := strings.CutSuffix(name, ".md")
	if !ok {
		return "", false
	}
	t, err := time.Parse(time.DateOnly, day)
	if err != nil || t.Format(time.DateOnly) != day {
		return "", false
	}
	return day, true
}
