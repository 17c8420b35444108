package archive

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
)

// batchEntries spans three channels, the system directory and two days,
// interleaved as a writer behind the turns would take them.
func batchEntries() []Entry {
	var es []Entry
	for i := range 12 {
		es = append(es, Entry{
			Time:      at(24+i%2, 10, i, 0),
			ChannelID: []string{"1", "2", "3", ""}[i%4],
			EventID:   uint64(i + 1),
			Kind:      "message",
			Prompt:    "prompt " + string(rune('a'+i)),
			Reply:     "reply " + string(rune('a'+i)),
			Outcome:   "ok",
			Duration:  time.Second,
		})
	}
	return es
}

// tree is every file under dir, by path relative to it, with its content.
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files[rel] = readFile(t, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestAppendSeveralWritesWhatOneByOneWrites(t *testing.T) {
	for _, split := range []int{1, 5, 12} {
		one := openArchive(t, Options{Keep: 3})
		for _, e := range batchEntries() {
			if err := one.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		many := openArchive(t, Options{Keep: 3})
		es := batchEntries()
		if err := many.Append(es[:split]...); err != nil {
			t.Fatal(err)
		}
		if err := many.Append(es[split:]...); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tree(t, one.dir), tree(t, many.dir)); diff != "" {
			t.Errorf("split at %d: files (-one by one +together):\n%s", split, diff)
		}
		for _, ch := range []string{"1", "2", "3", ""} {
			if diff := cmp.Diff(one.Recent(ch), many.Recent(ch)); diff != "" {
				t.Errorf("split at %d: recent of %q (-one by one +together):\n%s", split, ch, diff)
			}
		}
	}
}

func TestAppendSeveralSkipsInvalidChannelOnly(t *testing.T) {
	a := openArchive(t, Options{Keep: DefaultKeep})
	err := a.Append(
		Entry{Time: at(25, 10, 0, 0), ChannelID: "../x", Prompt: "p", Reply: "r"},
		Entry{Time: at(25, 10, 1, 0), ChannelID: "7", Prompt: "kept", Reply: "r"},
	)
	if err == nil {
		t.Fatal("no error for an invalid channel id")
	}
	if got := a.Recent("7"); len(got) != 1 || got[0].Prompt != "kept" {
		t.Errorf("recent of the valid channel = %+v, want the one entry", got)
	}
}

// BenchmarkAppendBatch is the archive's cost per exchange when the writer
// behind the turns takes 1,000 that piled up over 100 channels.
func BenchmarkAppendBatch(b *testing.B) {
	a, err := Open(Options{Dir: b.TempDir(), Keep: DefaultKeep}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]Entry, 1000)
	for i := range batch {
		batch[i] = Entry{ChannelID: strconv.Itoa(i % 100), Prompt: "hi", Reply: "hello", Outcome: "ok"}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := a.Append(batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/exchange")
}
