package proc

import (
	"bytes"
	"os"
	"strconv"
)

// GroupRSS returns the resident memory, in bytes, of each process group in
// pgids: the sum over every live process in the group, read from /proc. A
// group with no process left is absent from the result. Processes of other
// users are counted too (/proc/<pid>/statm is world-readable).
func GroupRSS(pgids ...int) map[int]int64 {
	want := make(map[int]bool, len(pgids))
	for _, g := range pgids {
		want[g] = true
	}
	out := make(map[int]int64, len(pgids))
	if len(want) == 0 {
		return out
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	page := int64(os.Getpagesize())
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, ok := readStat(pid)
		if !ok || st.dead() || !want[st.pgrp] {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/statm")
		if err != nil {
			continue
		}
		if pages, ok := parseStatmRSS(b); ok {
			out[st.pgrp] += pages * page
		}
	}
	return out
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
