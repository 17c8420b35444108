package gateway

import (
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/agent"
	"github.com/agentgateway/gateway/internal/archive"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
)

// ArchiveDir is the conversation archive's folder inside CONFIG_DIR.
const ArchiveDir = "conversations"

// recentContextBytes bounds the recent conversation a new session is
// given: enough for the thread, small next to the persona.
const recentContextBytes = 8 << 10

// exchanges keeps every exchange in the conversation archive and gives a
// channel's new session its recent conversation (agent.ExchangeRecorder,
// agent.History).
//
// The archive is written behind, by one goroutine that takes whatever has
// piled up and writes it as one batch, so a turn never waits for the disk.
// Close writes what is left.
type exchanges struct {
	archive *archive.Archive
	log     zerolog.Logger

	mu      sync.Mutex
	pending []archive.Entry
	// writing is the batch being appended: in neither pending nor the
	// archive's recent entries until the append is done.
	writing []archive.Entry
	dropped int
	closed  bool
	wake    chan struct{}
	closing chan struct{} // closed by Close
	done    chan struct{}
}

// maxPendingExchanges bounds the entries waiting for the disk: past it
// (a disk that stopped answering) new ones are dropped and counted.
const maxPendingExchanges = 100_000

// openExchanges opens CONFIG_DIR/conversations. A failure is logged and
// leaves the gateway without an archive rather than without a start.
func openExchanges(cfg *config.Config, log zerolog.Logger) *exchanges {
	log = log.With().Str("component", "archive").Logger()
	a, err := archive.Open(archive.Options{
		Dir:  filepath.Join(cfg.ConfigDir, ArchiveDir),
		Keep: cfg.HistoryMessages,
		Days: cfg.ArchiveDays,
		// Under a burst a channel's recent.json is rewritten once a
		// second, not once per exchange (RecentContext reads memory).
		SaveRecentEvery: time.Second,
	}, log)
	if err != nil {
		log.Error().Err(files.WithoutPath(err)).Msg("the conversation archive cannot be opened; exchanges are not archived")
		return nil
	}
	x := &exchanges{archive: a, log: log, wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	go x.write()
	return x
}

// write appends the pending entries until Close.
func (x *exchanges) write() {
	defer close(x.done)
	for {
		x.mu.Lock()
		batch, dropped, closed := x.pending, x.dropped, x.closed
		x.pending, x.dropped, x.writing = nil, 0, batch
		x.mu.Unlock()
		if dropped > 0 {
			x.log.Error().Int("dropped", dropped).Msg("exchanges not archived: the archive's disk fell too far behind")
		}
		if len(batch) > 0 {
			// One append per day file and one recent.json per channel for
			// the whole batch, however many exchanges piled up.
			if err := x.archive.Append(batch...); err != nil {
				x.log.Error().Err(files.WithoutPath(err)).Int("exchanges", len(batch)).Msg("exchanges not archived, some or all")
			}
			x.mu.Lock()
			x.writing = nil
			x.mu.Unlock()
		}
		if len(batch) == 0 {
			// Idle: the recent exchanges Append left for later.
			if err := x.archive.SaveRecent(); err != nil {
				x.log.Error().Err(files.WithoutPath(err)).Msg("recent exchanges not saved")
			}
			if closed {
				return
			}
			<-x.wake
			continue
		}
		// Let the next batch gather: under a burst each channel's files are
		// then written a few times a second, not once per exchange.
		// RecentContext reads the pending entries too, so nothing waits.
		select {
		case <-time.After(archiveBatchEvery):
		case <-x.closing:
		}
	}
}

// archiveBatchEvery is the least time between two batches of the archive
// writer while exchanges keep coming.
const archiveBatchEvery = 100 * time.Millisecond

// Close writes the entries still pending and stops the writer.
func (x *exchanges) Close() error {
	x.mu.Lock()
	if !x.closed {
		close(x.closing)
	}
	x.closed = true
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
	<-x.done
	return nil
}

// Exchange archives a finished event. Events that did not run (refused,
// or cut off by a shutdown: they run again) and steered prompts answered
// within another turn leave no entry.
func (x *exchanges) Exchange(e queue.Event, out agent.Outcome, took time.Duration) {
	if out.Refused || out.Interrupted || (out.Reply == "" && out.Err == nil && !out.Stopped && len(out.Tools) == 0) {
		return
	}
	outcome := "ok"
	switch {
	case out.Stopped:
		outcome = "stopped"
	case out.Err != nil:
		outcome = "error"
	}
	entry := archive.Entry{
		Time: time.Now(), ChannelID: e.ChannelID, EventID: e.ID, Kind: string(e.Kind), Name: e.Name,
		Author: e.Author, UserID: e.UserID, Prompt: e.Text, Reply: out.Reply, Tools: out.Tools,
		CostUSD: out.Result.CostUSD, Estimate: out.Result.CostEstimated, Outcome: outcome, Duration: took,
	}
	for _, f := range out.Attachments {
		entry.Attachments = append(entry.Attachments, f.Name)
	}
	for _, f := range out.Files {
		entry.Files = append(entry.Files, f.Name)
	}
	x.mu.Lock()
	switch {
	case x.closed:
		x.mu.Unlock()
		if err := x.archive.Append(entry); err != nil {
			x.log.Error().Err(files.WithoutPath(err)).Uint64("event", e.ID).Msg("exchange not archived")
		}
		return
	case len(x.pending) >= maxPendingExchanges:
		x.dropped++
	default:
		x.pending = append(x.pending, entry)
	}
	x.mu.Unlock()
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// RecentContext is the channel's recent conversation for a new session:
// the exchanges whose turns began at or after since, only userID's when
// it is set. A turn that was running when the channel was reset belongs
// to the conversation the reset ended, though it finished after it.
func (x *exchanges) RecentContext(channelID, userID string, since time.Time) string {
	// The entries not yet in the archive are taken first: one the writer
	// appends meanwhile is then in both, and kept once, rather than in
	// neither.
	var unwritten []archive.Entry
	x.mu.Lock()
	for _, e := range slices.Concat(x.writing, x.pending) {
		if e.ChannelID == channelID {
			unwritten = append(unwritten, e)
		}
	}
	x.mu.Unlock()
	type exchangeID struct {
		event uint64
		at    int64 // nanoseconds: what the archive kept of the time
	}
	entries := x.archive.Recent(channelID)
	written := make(map[exchangeID]bool, len(entries))
	for _, e := range entries {
		written[exchangeID{e.EventID, e.Time.UnixNano()}] = true
	}
	for _, e := range unwritten {
		if !written[exchangeID{e.EventID, e.Time.UnixNano()}] {
			entries = append(entries, e)
		}
	}
	if !since.IsZero() {
		entries = slices.DeleteFunc(entries, func(e archive.Entry) bool { return e.Time.Add(-e.Duration).Before(since) })
	}
	if userID != "" {
		entries = slices.DeleteFunc(entries, func(e archive.Entry) bool { return e.UserID != userID })
	}
	return archive.RecentSection(entries, recentContextBytes)
}
