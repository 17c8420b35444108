// Package tzdata embeds the IANA time zone database, as time/tzdata does,
// so that time.LoadLocation (and TZ for time.Local, and CRON_TZ= in a cron
// expression) works on machines and images without /usr/share/zoneinfo.
//
// time/tzdata embeds Go's lib/time/zoneinfo.zip uncompressed: 400 KB of
// binary. This package embeds the same file gzipped (95 KB) and serves each
// zone by decompressing the archive up to that zone's entry. Like time/tzdata
// it is consulted only when the system has no zoneinfo of its own.
//
// Import it for its side effect: import _ ".../internal/tzdata".
package tzdata

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	_ "unsafe" // for go:linkname
)

// zoneinfoZipGz is $GOROOT/lib/time/zoneinfo.zip, gzipped; TestMatchesGoroot
// says when it is out of step with the Go release and how to refresh it.
//
//go:embed zoneinfo.zip.gz
var zoneinfoZipGz []byte

// registerLoadFromEmbeddedTZData is the time package's hook for time/tzdata;
// time marks it for linking from outside the standard library.
//
//go:linkname registerLoadFromEmbeddedTZData time.registerLoadFromEmbeddedTZData
func registerLoadFromEmbeddedTZData(func(string) (string, error))

func init() {
	registerLoadFromEmbeddedTZData(load)
}

// load returns the TZif data of the zone name, or syscall.ENOENT when the
// archive has no such zone (what time/tzdata returns too).
func load(name string) (string, error) {
	data, err := find(bytes.NewReader(zoneinfoZipGz), name)
	if err != nil {
		return "", err
	}
	return string(data), nil
}

const (
	localHeaderSig  = 0x04034b50
	localHeaderSize = 30
	methodStore     = 0
	flagDescriptor  = 1 << 3 // sizes follow the data instead of preceding it
)

var errCorrupt = errors.New("corrupt embedded tzdata")

// find reads the gzipped zip archive's local file headers in order and
// returns the contents of the entry called name. The archive holds stored
// (uncompressed) entries whose sizes are in their local headers, as Go's
// zoneinfo.zip does.
func find(gz io.Reader, name string) ([]byte, error) {
	zr, err := gzip.NewReader(gz)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCorrupt, err)
	}
	r := bufio.NewReader(zr)
	var hdr [localHeaderSize]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		if binary.LittleEndian.Uint32(hdr[0:]) != localHeaderSig {
			return nil, syscall.ENOENT // past the last entry: the central directory
		}
		flags := binary.LittleEndian.Uint16(hdr[6:])
		method := binary.LittleEndian.Uint16(hdr[8:])
		size := int64(binary.LittleEndian.Uint32(hdr[22:]))
		nameLen := int(binary.LittleEndian.Uint16(hdr[26:]))
		extraLen := int64(binary.LittleEndian.Uint16(hdr[28:]))
		if method != methodStore || flags&flagDescriptor != 0 {
			return nil, fmt.Errorf("%w: unsupported entry (method %d, flags %#x)", errCorrupt, method, flags)
		}
		zname := make([]byte, nameLen)
		if _, err := io.ReadFull(r, zname); err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		if _, err := r.Discard(int(extraLen)); err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		if string(zname) != name {
			if _, err := r.Discard(int(size)); err != nil {
				return nil, fmt.Errorf("%w: %w", errCorrupt, err)
			}
			continue
		}
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("%w: %w", errCorrupt, err)
		}
		return data, nil
	}
}
