package proc

import (
	"bufio"
	"context"
	"os"
	"testing"
)

func TestGroupRSSCountsTheGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A shell and a child in its group: the sum covers both.
	p := startSh(t, ctx, "sleep 300 & echo ready; wait", nil)
	readLine(t, bufio.NewReader(p.Stdout()))
	rss := GroupRSS(p.Pid(), os.Getpid()+1<<22)
	if rss[p.Pid()] <= 0 {
		t.Fatalf("GroupRSS = %v: want the group's memory", rss)
	}
	if _, ok := rss[os.Getpid()+1<<22]; ok {
		t.Errorf("a group with no process is reported: %v", rss)
	}
	cancel()
	waitExit(t, p, DefaultGrace*2)
	if got := GroupRSS(p.Pid()); got[p.Pid()] != 0 {
		t.Errorf("after the group died: %v", got)
	}
}

func TestParseStatmRSS(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2000 350 120 10 0 300 0\n", 350, true},
		{"1 2", 2, true},
		{"1", 0, false},
		{"", 0, false},
		{"1 -3", 0, false},
		{"1 x", 0, false},
	} {
		got, ok := parseStatmRSS([]byte(tc.in))
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseStatmRSS(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzParseStatmRSS(f *testing.F) {
	f.Add([]byte("2000 350 120 10 0 300 0\n"))
	f.Add([]byte("1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, ok := parseStatmRSS(b); ok && n < 0 {
			t.Fatalf("negative rss %d", n)
		}
	})
}
