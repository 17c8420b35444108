package transcribe

import (
	"bytes"
	"encoding/binary"
	"time"
)

// opusRate is the granule rate of every Ogg Opus stream (RFC 7845 §4).
const opusRate = 48000

// OggDuration reads the length of an Ogg Opus recording (a Discord voice
// message) from its own pages: the last page's granule position, less
// the pre-skip of the OpusHead header, at 48 kHz. ok is false when data
// is not an Ogg Opus stream whose length can be read; nothing is decoded.
func OggDuration(data []byte) (d time.Duration, ok bool) {
	preSkip, ok := opusPreSkip(data)
	if !ok {
		return 0, false
	}
	granule, ok := lastGranule(data)
	if !ok || granule < preSkip {
		return 0, false
	}
	samples := granule - preSkip
	if samples > uint64(1<<62)/uint64(time.Second) {
		return 0, false
	}
	return time.Duration(samples * uint64(time.Second) / opusRate), true
}

// oggPage is the capture pattern every page starts with; a page header is
// 27 bytes before its segment table.
var oggPage = []byte("OggS")

const pageHeader = 27

// opusPreSkip reads the pre-skip of the OpusHead packet in the first page.
func opusPreSkip(data []byte) (uint64, bool) {
	if len(data) < pageHeader || !bytes.HasPrefix(data, oggPage) {
		return 0, false
	}
	segments := int(data[26])
	start := pageHeader + segments
	if len(data) < start+12 || !bytes.HasPrefix(data[start:], []byte("OpusHead")) {
		return 0, false
	}
	return uint64(binary.LittleEndian.Uint16(data[start+10:])), true
}

// lastGranule is the granule position of the last complete page header,
// found from the end (a granule of -1, no packet ends there, is skipped).
func lastGranule(data []byte) (uint64, bool) {
	end := len(data)
	for end > 0 {
		i := bytes.LastIndex(data[:end], oggPage)
		if i < 0 {
			return 0, false
		}
		end = i
		if len(data)-i < pageHeader || data[i+4] != 0 {
			continue // cut short, or not a version 0 page header
		}
		g := binary.LittleEndian.Uint64(data[i+6:])
		if g == ^uint64(0) {
			continue
		}
		return g, true
	}
	return 0, false
}
