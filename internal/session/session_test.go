package session

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func openStore(t *testing.T, path string) *Store {
	t.Helper()
	s, warning, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if warning != "" {
		t.Fatalf("unexpected warning: %s", warning)
	}
	return s
}

// Properties 8, 10, 11 and restart persistence, over random operations
// checked against a plain map.
func TestStoreMatchesModelAndSurvivesRestart(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for iter := 0; iter < 30; iter++ {
		path := filepath.Join(t.TempDir(), FileName)
		s := openStore(t, path)
		model := map[string]string{}
		for op := 0; op < 60; op++ {
			ch := fmt.Sprint(rng.IntN(6))
			switch rng.IntN(3) {
			case 0, 1:
				id := fmt.Sprintf("sess-%d", rng.Int())
				if err := s.Set(ch, Binding{SessionID: id, Backend: "claude", Persona: map[string]string{"Identity": "h"}}); err != nil {
					t.Fatal(err)
				}
				model[ch] = id
			case 2:
				_, had := model[ch]
				got, err := s.Delete(ch)
				if err != nil || got != had {
					t.Fatalf("Delete(%s) = %v, %v; want %v", ch, got, err, had)
				}
				delete(model, ch)
			}
			for other, want := range model {
				b, ok := s.Get(other)
				if !ok || b.SessionID != want {
					t.Fatalf("after op %d: Get(%s) = %+v, want %s", op, other, b, want)
				}
			}
		}
		restarted := openStore(t, path)
		got := map[string]string{}
		for _, ch := range restarted.Channels() {
			b, _ := restarted.Get(ch)
			got[ch] = b.SessionID
		}
		if diff := cmp.Diff(model, got); diff != "" {
			t.Fatalf("after restart (-want +got):\n%s", diff)
		}
	}
}

func TestGetReturnsACopy(t *testing.T) {
	s := openStore(t, "")
	s.Set("c", Binding{SessionID: "x", Persona: map[string]string{"Identity": "a"}})
	b, _ := s.Get("c")
	b.Persona["Identity"] = "changed"
	again, _ := s.Get("c")
	if again.Persona["Identity"] != "a" {
		t.Error("changing a returned binding changed the store")
	}
}

func TestLegacyFlatFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	os.WriteFile(path, []byte(`{"1475008084022788312":"37336c32-73cb-4cf5-9771-1c8f694398ff"}`), 0o600)
	s := openStore(t, path)
	b, ok := s.Get("1475008084022788312")
	if !ok || b.SessionID != "37336c32-73cb-4cf5-9771-1c8f694398ff" {
		t.Errorf("Get = %+v, %v", b, ok)
	}
}

func TestCorruptFileIsMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	os.WriteFile(path, []byte(`{"version":1,"channels":{`), 0o600)
	s, warning, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warning, "moved it to") {
		t.Errorf("warning = %q", warning)
	}
	if len(s.Channels()) != 0 {
		t.Error("corrupt store should start empty")
	}
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Errorf("found %v, want the corrupt file kept aside", matches)
	}
	if err := s.Set("c", Binding{SessionID: "x", Updated: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// A failed save keeps the new binding in memory (the session keeps working)
// and reports the error; the next successful save writes it.
func TestFailedSaveKeepsMemoryConsistent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	s := openStore(t, path)
	if err := s.Set("c", Binding{SessionID: "one"}); err != nil {
		t.Fatal(err)
	}
	// Replace the file by a non-empty directory so the next save fails.
	os.Remove(path)
	os.MkdirAll(filepath.Join(path, "block"), 0o755)
	if err := s.Set("c", Binding{SessionID: "two"}); err == nil {
		t.Fatal("save succeeded")
	}
	if b, _ := s.Get("c"); b.SessionID != "two" {
		t.Errorf("after a failed save Get = %q, want the new binding kept in memory", b.SessionID)
	}
	os.RemoveAll(path)
	if err := s.Set("d", Binding{SessionID: "three"}); err != nil {
		t.Fatal(err)
	}
	reopened := openStore(t, path)
	if b, _ := reopened.Get("c"); b.SessionID != "two" {
		t.Errorf("after recovery the file has c = %q, want two", b.SessionID)
	}
}

func TestConcurrentSetsAreAllDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openStore(t, path)
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Set(fmt.Sprint("c", i), Binding{SessionID: fmt.Sprint("s", i)}); err != nil {
				t.Error(err)
			}
			// Set returned: the binding must be on disk now.
			data, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(data), fmt.Sprintf(`"s%d"`, i)) {
				t.Errorf("binding c%d not on disk when Set returned", i)
			}
		}()
	}
	wg.Wait()
	if got := len(openStore(t, path).Channels()); got != 100 {
		t.Errorf("reopened store has %d channels, want 100", got)
	}
}

// A channel's settings survive a restart and a reset of its conversation;
// clearing every setting removes the entry.
func TestSettingsOutliveResetsAndRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openStore(t, path)
	if err := s.Set("c1", Binding{SessionID: "s1", WorkDir: "/srv/a"}); err != nil {
		t.Fatal(err)
	}
	before, after, err := s.UpdateSettings("c1", func(st *Settings) {
		st.Project, st.Model, st.SystemPrompt = "/srv/a", "opus", "Answer in French."
	})
	if err != nil {
		t.Fatal(err)
	}
	if !before.IsZero() || after.Model != "opus" {
		t.Fatalf("UpdateSettings = %+v, %+v", before, after)
	}
	if _, err := s.Delete("c1"); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, path)
	want := Settings{Project: "/srv/a", Model: "opus", SystemPrompt: "Answer in French."}
	if diff := cmp.Diff(want, s.Settings("c1")); diff != "" {
		t.Fatalf("settings after reset and restart (-want +got):\n%s", diff)
	}
	if _, ok := s.Get("c1"); ok {
		t.Fatal("the reset binding came back")
	}
	if _, _, err := s.UpdateSettings("c1", func(st *Settings) { *st = Settings{} }); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if _, ok := stored.Settings["c1"]; ok {
		t.Fatalf("cleared settings still stored:\n%s", data)
	}
}

// A person's reset (Delete) is remembered with its time across a restart,
// so the conversation before it is never given to a later session; a
// binding dropped because it was lost (Drop) leaves no such mark. Both
// begin a new epoch.
func TestResetMarksTheConversationsEnd(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		bound     bool
		forget    func(s *Store) (bool, error)
		wantHad   bool
		wantReset time.Time
	}{
		{"a person resets a bound channel", true, func(s *Store) (bool, error) { return s.Delete("c") }, true, at},
		{"a person resets a channel with no binding", false, func(s *Store) (bool, error) { return s.Delete("c") }, false, at},
		{"the session was lost", true, func(s *Store) (bool, error) { return s.Drop("c") }, true, time.Time{}},
		{"nothing was bound to lose", false, func(s *Store) (bool, error) { return s.Drop("c") }, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			s := openStore(t, path)
			s.now = func() time.Time { return at }
			if tc.bound {
				if err := s.Set("c", Binding{SessionID: "s1"}); err != nil {
					t.Fatal(err)
				}
			}
			_, _, epoch := s.Current("c")
			had, err := tc.forget(s)
			if err != nil || had != tc.wantHad {
				t.Fatalf("forget = %v, %v; want %v", had, err, tc.wantHad)
			}
			if stored, _ := s.SetIn("c", epoch, Binding{SessionID: "late"}); stored {
				t.Error("a turn begun before the binding was forgotten bound it again")
			}
			if got := s.ResetAt("c"); !got.Equal(tc.wantReset) {
				t.Errorf("ResetAt = %v, want %v", got, tc.wantReset)
			}
			restarted := openStore(t, path)
			if got := restarted.ResetAt("c"); !got.Equal(tc.wantReset) {
				t.Errorf("after a restart ResetAt = %v, want %v", got, tc.wantReset)
			}
			if got := restarted.ResetAt("other"); !got.IsZero() {
				t.Errorf("ResetAt of a channel never reset = %v", got)
			}
		})
	}
}

// Whatever the file holds, parse does not panic, and what it accepts
// survives being written and read again.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"channels":{"c":{"session_id":"s","backend":"claude"}},"settings":{"c":{"model":"opus"}},"resets":{"c":"2025-03-04T05:06:07Z"}}`))
	f.Add([]byte(`{"1475008084022788312":"37336c32-73cb-4cf5-9771-1c8f694398ff"}`))
	f.Add([]byte(`{"version":1,"channels":{`))
	f.Add([]byte(`{"version":1,"resets":{"c":"0001-01-01T00:00:00Z"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		first, err := parse(data)
		if err != nil {
			return
		}
		encoded, err := json.Marshal(first)
		if err != nil {
			return // e.g. a time JSON cannot hold
		}
		again, err := parse(encoded)
		if err != nil {
			t.Fatalf("parse of its own output: %v\n%s", err, encoded)
		}
		if diff := cmp.Diff(first, again, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("written and read again (-first +again):\n%s", diff)
		}
	})
}
