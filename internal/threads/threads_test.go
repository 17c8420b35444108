package threads

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStoreKeepsThreadsAcrossReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	s, warning, err := Open(path)
	if err != nil || warning != "" {
		t.Fatalf("Open = %v, %q", err, warning)
	}
	created := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	th := Thread{ID: "2", Parent: "1", Guild: "9", Author: "7", Name: "Fix the bug", Created: created}
	if added, err := s.Add(th); !added || err != nil {
		t.Fatalf("Add = %v, %v", added, err)
	}
	// A thread is opened once: a second Add (a restart taking the same
	// message again) keeps what it inherited then.
	if added, err := s.Add(Thread{ID: "2", Parent: "other", Created: created.Add(time.Hour)}); added || err != nil {
		t.Fatalf("second Add = %v, %v; want false, nil", added, err)
	}
	used := created.Add(time.Minute)
	if err := s.Touch("2", used); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(Thread{ID: "3", Parent: "1", Created: created.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkGone("3"); err != nil {
		t.Fatal(err)
	}
	if err := s.Touch("unknown", used); err != nil {
		t.Errorf("Touch of an unknown thread = %v, want nothing done", err)
	}

	again, _, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	th.LastUsed = used
	want := []Thread{th, {ID: "3", Parent: "1", Created: created.Add(time.Second), Gone: true}}
	if diff := cmp.Diff(want, again.List()); diff != "" {
		t.Errorf("after reopen (-want +got):\n%s", diff)
	}
	if !again.Owns("2") || again.Owns("1") {
		t.Error("Owns: want the thread, not its channel")
	}
	if err := again.Remove("2"); err != nil {
		t.Fatal(err)
	}
	if third, _, _ := Open(path); third.Owns("2") {
		t.Error("a removed thread came back after reopen")
	}
}

func TestStoreMovesAsideAnUnreadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, warning, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warning, "could not be read") || len(s.List()) != 0 {
		t.Errorf("warning = %q, threads = %v", warning, s.List())
	}
	matches, _ := filepath.Glob(filepath.Join(dir, FileName+".corrupt-*"))
	if len(matches) != 1 {
		t.Errorf("moved aside: %v, want one file", matches)
	}
}

func TestAddRefusesAThreadWithoutItsChannel(t *testing.T) {
	t.Parallel()
	s, _, _ := Open("")
	if _, err := s.Add(Thread{ID: "1"}); err == nil {
		t.Error("Add without a parent channel succeeded")
	}
}

func TestPruneForgetsIdleThreadsButKeepsThoseAskedFor(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	s, _, _ := Open(path)
	day := 24 * time.Hour
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, th := range []Thread{
		{ID: "old", Parent: "1", Created: now.Add(-90 * day)},
		{ID: "old-but-used", Parent: "1", Created: now.Add(-90 * day), LastUsed: now.Add(-day)},
		{ID: "old-with-worktree", Parent: "1", Created: now.Add(-90 * day)},
		{ID: "new", Parent: "1", Created: now.Add(-day)},
	} {
		if _, err := s.Add(th); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(now.Add(-30*day), func(id string) bool { return id == "old-with-worktree" })
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 forgotten", n, err)
	}
	again, _, _ := Open(path)
	var ids []string
	for _, th := range again.List() {
		ids = append(ids, th.ID)
	}
	if diff := cmp.Diff([]string{"old-but-used", "old-with-worktree", "new"}, ids); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}
