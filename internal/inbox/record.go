package inbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/agentgateway/gateway/internal/queue"
)

// The log is a sequence of records, each framed as
//
//	length  uint32, little endian: bytes of payload
//	crc     uint32, little endian: CRC-32C of payload
//	payload JSON object (record)
//
// The first record is the header. Replay stops at the first record that is
// short, fails its checksum, claims an absurd length or does not parse: a
// write torn by a crash can only be the last one, and everything before it
// was fsync'd before any later write began.

const (
	frameHeader = 8
	// maxRecord bounds a record's payload: a reply of at most a few MiB
	// fits many times over; anything larger is corruption.
	maxRecord = 64 << 20
	// formatVersion is the header's version.
	formatVersion = 1
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record types.
const (
	recHeader  = "header"
	recState   = "state"   // compaction: LastID and LastSeen
	recEntry   = "entry"   // compaction: one entry's whole state
	recAdd     = "add"     // Add
	recStart   = "start"   // Started
	recTool    = "tool"    // ToolStarted
	recReply   = "reply"   // Replied
	recDeliver = "deliver" // Delivered
	recFinish  = "finish"  // Finish
	recSeen    = "seen"    // See
)

// record is one entry of the log; which fields are set depends on T.
type record struct {
	T       string       `json:"t"`
	Version int          `json:"v,omitempty"`
	Prefix  string       `json:"prefix,omitempty"`
	ID      uint64       `json:"id,omitempty"`
	LastID  uint64       `json:"last_id,omitempty"`
	Event   *queue.Event `json:"event,omitempty"`
	Entry   *Entry       `json:"entry,omitempty"`
	Seen    []Seen       `json:"seen,omitempty"`
	Text    string       `json:"text,omitempty"`
	Files   []string     `json:"files,omitempty"`
	Chunk   int          `json:"chunk,omitempty"`
	Message string       `json:"message,omitempty"`
	State   State        `json:"state,omitempty"`
	At      time.Time    `json:"at"`
}

// encode frames r.
func encode(r record) ([]byte, error) {
	b := make([]byte, frameHeader, frameHeader+96)
	var err error
	if b, err = appendPayload(b, r); err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.T, err)
	}
	payload := b[frameHeader:]
	if len(payload) > maxRecord {
		return nil, fmt.Errorf("%s record of %d bytes is larger than %d", r.T, len(payload), maxRecord)
	}
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, castagnoli))
	return b, nil
}

// appendPayload appends r as JSON. The records every event writes several
// times and that hold only numbers and ids (a start, a tool, a delivery, an
// end) are written by hand, in the shape json.Marshal gives them; the
// others, and any value that would need escaping, go through
// encoding/json.
func appendPayload(b []byte, r record) ([]byte, error) {
	switch r.T {
	case recStart, recTool, recFinish, recDeliver:
		if r.Message == "" || plainID(r.Message) {
			b = append(b, `{"t":"`...)
			b = append(b, r.T...)
			b = append(b, '"')
			if r.ID != 0 {
				b = append(b, `,"id":`...)
				b = strconv.AppendUint(b, r.ID, 10)
			}
			if r.Chunk != 0 {
				b = append(b, `,"chunk":`...)
				b = strconv.AppendInt(b, int64(r.Chunk), 10)
			}
			if r.Message != "" {
				b = append(b, `,"message":"`...)
				b = append(b, r.Message...)
				b = append(b, '"')
			}
			if r.State != 0 {
				b = append(b, `,"state":`...)
				b = strconv.AppendUint(b, uint64(r.State), 10)
			}
			at, err := r.At.MarshalJSON()
			if err != nil {
				return nil, err
			}
			b = append(b, `,"at":`...)
			b = append(b, at...)
			return append(b, '}'), nil
		}
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, payload...), nil
}

// plainID reports whether s is a Discord id or the like: ASCII letters
// and digits only, nothing JSON would escape.
func plainID(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// encodeWithJSON frames r as encoding/json writes it (the fuzz test's
// reference).
func encodeWithJSON(r record) ([]byte, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode %s record: %w", r.T, err)
	}
	if len(payload) > maxRecord {
		return nil, fmt.Errorf("%s record of %d bytes is larger than %d", r.T, len(payload), maxRecord)
	}
	b := make([]byte, frameHeader, frameHeader+len(payload))
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, castagnoli))
	return append(b, payload...), nil
}

// errTorn ends a replay: the rest of the log is not to be trusted.
var errTorn = errors.New("torn or corrupt record")

// decode reads the record at the start of b and how many bytes it took.
func decode(b []byte) (record, int, error) {
	if len(b) < frameHeader {
		return record{}, 0, errTorn
	}
	n := binary.LittleEndian.Uint32(b[0:4])
	if n == 0 || n > maxRecord || uint64(len(b)-frameHeader) < uint64(n) {
		return record{}, 0, errTorn
	}
	payload := b[frameHeader : frameHeader+int(n)]
	if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(b[4:8]) {
		return record{}, 0, errTorn
	}
	var r record
	if err := json.Unmarshal(payload, &r); err != nil || r.T == "" {
		return record{}, 0, errTorn
	}
	return r, frameHeader + int(n), nil
}
