// Package procmem reads how much memory process groups hold, from /proc:
// their proportional set size (PSS), in which a page shared by n
// processes counts 1/n in each, so that summing over processes counts it
// once; and their resident set size (RSS), in which it counts whole in
// each.
//
// PSS comes from /proc/<pid>/smaps_rollup, which needs Linux 4.14 and the
// right to trace the process (the same user, or CAP_SYS_PTRACE). Where it
// cannot be read, a process counts by its RSS (/proc/<pid>/statm, readable
// by anyone) and the group's Usage says how many did.
//
// Nothing here keeps state: every function may be called from any
// goroutine.
package procmem

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrMalformed is smaps_rollup text the parser cannot read.
var ErrMalformed = errors.New("malformed smaps_rollup")

// Rollup is what ParseRollup reads from /proc/<pid>/smaps_rollup, in kB
// (the kernel's unit, 1024 bytes).
type Rollup struct {
	RSSKB, PSSKB int64
	// PSSAnonKB, PSSFileKB and PSSShmemKB split PSSKB by the kind of page
	// (Linux 5.9 on; zero before): anonymous memory, file-backed pages
	// (a binary's text, mapped files) and shared memory.
	PSSAnonKB, PSSFileKB, PSSShmemKB int64
}

// ParseRollup reads the Rss, Pss and Pss_* lines of smaps_rollup text; it
// ignores the header line (the [rollup] address range) and every other
// field. Rss and Pss must be present, each once, as "Name: <n> kB".
func ParseRollup(b []byte) (Rollup, error) {
	var r Rollup
	fields := map[string]*int64{
		"Rss": &r.RSSKB, "Pss": &r.PSSKB,
		"Pss_Anon": &r.PSSAnonKB, "Pss_File": &r.PSSFileKB, "Pss_Shmem": &r.PSSShmemKB,
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4<<10), 64<<10)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		dst := fields[name]
		if !ok || dst == nil {
			continue
		}
		if seen[name] {
			return Rollup{}, fmt.Errorf("%w: %s twice", ErrMalformed, name)
		}
		seen[name] = true
		n, err := parseKB(rest)
		if err != nil {
			return Rollup{}, fmt.Errorf("%w: %s: %w", ErrMalformed, name, err)
		}
		*dst = n
	}
	if err := sc.Err(); err != nil {
		return Rollup{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if !seen["Rss"] || !seen["Pss"] {
		return Rollup{}, fmt.Errorf("%w: no Rss or Pss line", ErrMalformed)
	}
	return r, nil
}

// parseKB reads " <n> kB", the value of a smaps_rollup line.
func parseKB(s string) (int64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("value %q is not <n> kB", strings.TrimSpace(s))
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n < 0 || n > maxKB {
		return 0, fmt.Errorf("value %q is not a size", f[0])
	}
	return n, nil
}

// maxKB keeps a size in bytes within int64.
const maxKB = 1<<53 - 1

// Usage is the memory of one process group.
type Usage struct {
	// PSSBytes is the group's proportional set size: shared pages divided
	// among the processes that map them. A process whose smaps_rollup
	// could not be read counts by its RSS here (see RSSOnly).
	PSSBytes int64
	// PSSAnonBytes is the anonymous part of PSSBytes (heaps, stacks):
	// memory the group alone holds, for the most part.
	PSSAnonBytes int64
	// PSSFileBytes is the file-backed part of PSSBytes (the binary's
	// pages, mostly): pages that stay in memory for the other processes
	// mapping them when this group ends.
	PSSFileBytes int64
	// RSSBytes is the group's resident set size, shared pages counted in
	// full in each process.
	RSSBytes int64
	// Processes is how many live processes the group had.
	Processes int
	// RSSOnly is how many of them count by RSS for want of smaps_rollup.
	RSSOnly int
}

// Reader reads process memory from a /proc tree.
type Reader struct {
	// Root is the /proc directory; "" is /proc. Tests point it at a tree
	// of their own.
	Root string
}

// Groups returns the memory of each process group in pgids, summed over
// its live processes, read from /proc. A group with no process left is
// absent from the result.
func Groups(pgids ...int) map[int]Usage { return Reader{}.Groups(pgids...) }

// Groups is the package's Groups on r's /proc tree.
func (r Reader) Groups(pgids ...int) map[int]Usage {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	out := make(map[int]Usage, len(pgids))
	if len(want) == 0 {
		return out
	}
	entries, err := os.ReadDir(r.root())
	if err != nil {
		return out
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := filepath.Join(r.root(), e.Name())
		pgrp, live := readPgrp(dir)
		if !live || !want[pgrp] {
			continue
		}
		u, ok := processUsage(dir)
		if !ok {
			continue // gone meanwhile
		}
		g := out[pgrp]
		g.PSSBytes += u.PSSBytes
		g.PSSAnonBytes += u.PSSAnonBytes
		g.PSSFileBytes += u.PSSFileBytes
		g.RSSBytes += u.RSSBytes
		g.Processes++
		g.RSSOnly += u.RSSOnly
		out[pgrp] = g
	}
	return out
}

func (r Reader) root() string {
	if r.Root == "" {
		return "/proc"
	}
	return r.Root
}

// processUsage is one process's memory: from smaps_rollup, or else its
// RSS from statm.
func processUsage(dir string) (Usage, bool) {
	if b, err := os.ReadFile(filepath.Join(dir, "smaps_rollup")); err == nil {
		if ro, err := ParseRollup(b); err == nil {
			return Usage{PSSBytes: ro.PSSKB << 10, PSSAnonBytes: ro.PSSAnonKB << 10, PSSFileBytes: ro.PSSFileKB << 10, RSSBytes: ro.RSSKB << 10, Processes: 1}, true
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "statm"))
	if err != nil {
		return Usage{}, false
	}
	pages, ok := parseStatmRSS(b)
	if !ok {
		return Usage{}, false
	}
	rss := pages * int64(os.Getpagesize())
	return Usage{PSSBytes: rss, RSSBytes: rss, Processes: 1, RSSOnly: 1}, true
}

// readPgrp reads the process group of the process whose /proc directory
// is dir, and whether the process is alive (not a zombie).
func readPgrp(dir string) (pgrp int, live bool) {
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, false
	}
	return parseStatPgrp(b)
}

// parseStatPgrp reads the state and process group from /proc/<pid>/stat:
// "pid (comm) state ppid pgrp ...", where comm may hold anything,
// parentheses and spaces included.
func parseStatPgrp(b []byte) (pgrp int, live bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, false
	}
	switch f[0][0] {
	case 'Z', 'X', 'x':
		return 0, false
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return 0, false
	}
	return pgrp, true
}

// parseStatmRSS reads the resident pages, the second field of
// /proc/<pid>/statm.
func parseStatmRSS(b []byte) (int64, bool) {
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	n, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
