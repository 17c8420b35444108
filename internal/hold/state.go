package hold

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentgateway/gateway/internal/atomicfile"
)

// Hold is a schedule change waiting for an approver.
type Hold struct {
	// ID is random: a button from an older hold never matches a newer one.
	ID   string `json:"id"`
	File string `json:"file"`
	// Before is the file as the schedule runs it (and as it is on disk
	// while the hold waits); After is the proposed content.
	Before text `json:"before"`
	After  text `json:"after"`
	// Tools are the writing tools the turns that made the change called.
	Tools []string `json:"tools"`
	// Channel and Message are where the hold was posted; Message is empty
	// until Discord took it.
	Channel string    `json:"channel,omitempty"`
	Message string    `json:"message,omitempty"`
	Created time.Time `json:"created"`

	// retryAt is when a failed post is tried again.
	retryAt time.Time
}

// stateFile is the JSON kept at Options.StatePath.
type stateFile struct {
	Holds []*Hold `json:"holds"`
}

// ReadPending returns the holds kept in dir's state file, by file name
// order (for doctor; a running gateway may change them at any time).
func ReadPending(dir string) ([]Hold, error) {
	holds, err := loadHolds(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	var out []Hold
	for _, name := range Files {
		if h := holds[name]; h != nil {
			out = append(out, *h)
		}
	}
	return out, nil
}

// loadHolds reads the pending holds by file; a missing state file is none.
// A file that cannot be parsed is an error: the holds in it would be lost.
func loadHolds(path string) (map[string]*Hold, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]*Hold{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read held schedule changes: %w", err)
	}
	var s stateFile
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read held schedule changes from %s: %w (move the file away to drop them)", StateFile, err)
	}
	holds := map[string]*Hold{}
	for _, h := range s.Holds {
		if h != nil && slices.Contains(Files, h.File) && h.ID != "" {
			holds[h.File] = h
		}
	}
	return holds, nil
}

// saveLocked writes the pending holds (0600: they hold the files' content);
// with none left the file is removed. op must be held.
func (g *Gate) saveLocked() error {
	var s stateFile
	for _, name := range Files {
		if h := g.holds[name]; h != nil {
			s.Holds = append(s.Holds, h)
		}
	}
	if len(s.Holds) == 0 {
		if err := os.Remove(g.opts.StatePath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", StateFile, err)
		}
		return nil
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(g.opts.StatePath, append(b, '\n'), 0o600)
}

func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
