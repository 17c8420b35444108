package backends

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// chunkReader returns its chunks one Read at a time: a chunk with err set
// is that error instead of data.
type chunkReader struct {
	chunks []chunk
}

type chunk struct {
	data string
	err  error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	c := r.chunks[0]
	if c.err != nil {
		r.chunks = r.chunks[1:]
		return 0, c.err
	}
	n := copy(p, c.data)
	if n == len(c.data) {
		r.chunks = r.chunks[1:]
	} else {
		r.chunks[0].data = c.data[n:]
	}
	return n, nil
}

// collectLines receives every line of lp until lines is closed, failing
// the test if that takes more than a few seconds.
func collectLines(t *testing.T, lp *linePipe) []string {
	t.Helper()
	var got []string
	deadline := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lp.lines:
			if !ok {
				if !lp.exited.Load() {
					t.Error("lines is closed but exited is not set")
				}
				return got
			}
			got = append(got, string(l))
		case <-deadline:
			t.Fatalf("lines not closed; got %q so far", got)
		}
	}
}

func TestLinePipe(t *testing.T) {
	boom := errors.New("boom")
	long := strings.Repeat("x", 40)
	for _, tc := range []struct {
		name        string
		chunks      []chunk
		want        []string
		wantSkipped int
		wantErr     error
	}{
		{
			name:   "EOF closes lines after the last line, with or without its newline",
			chunks: []chunk{{data: "one\ntw"}, {data: "o\r\nthree"}},
			want:   []string{"one", "two", "three"},
		},
		{
			name:        "an overlong line is skipped and counted",
			chunks:      []chunk{{data: "a\n" + long[:20]}, {data: long[20:] + "\nb\n"}, {data: long + "\n"}},
			want:        []string{"a", "b"},
			wantSkipped: 2,
		},
		{
			name:    "a read error is kept and the rest drained",
			chunks:  []chunk{{data: "a\n"}, {err: boom}, {data: "never\nread\n"}, {data: long}},
			want:    []string{"a"},
			wantErr: boom,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &chunkReader{chunks: tc.chunks}
			var lp linePipe
			ended := 0
			lp.readLines(r, 4, 16, func() {
				ended++
				if lp.exited.Load() {
					t.Error("ended ran after exited was set")
				}
			})
			got := collectLines(t, &lp)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lines (-want +got):\n%s", diff)
			}
			if lp.skipped != tc.wantSkipped {
				t.Errorf("skipped = %d, want %d", lp.skipped, tc.wantSkipped)
			}
			if !errors.Is(lp.scanErr, tc.wantErr) || (tc.wantErr == nil) != (lp.scanErr == nil) {
				t.Errorf("scanErr = %v, want %v", lp.scanErr, tc.wantErr)
			}
			if len(r.chunks) != 0 {
				t.Errorf("%d chunks left unread, want the reader drained", len(r.chunks))
			}
			if ended != 1 {
				t.Errorf("ended ran %d times, want once", ended)
			}
		})
	}
}
