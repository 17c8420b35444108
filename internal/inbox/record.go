package inbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
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
