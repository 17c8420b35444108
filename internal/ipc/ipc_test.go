package ipc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

const (
	chanA = "123456789012345678"
	chanB = "223456789012345678"
	// waitTimeout bounds every wait in these tests; nothing sleeps.
	waitTimeout = 10 * time.Second
)

var parseTests = []struct {
	name    string
	in      string
	want    Message
	wantErr string
}{
	{
		name: "text and files",
		in:   `{"channel_id": "123456789012345678", "text": "Backup finished", "files": ["reports/backup.log"]}`,
		want: Message{ChannelID: chanA, Text: "Backup finished", Files: []string{"reports/backup.log"}},
	},
	{name: "text only", in: `{"channel_id":"123456789012345678","text":"hi"}`, want: Message{ChannelID: chanA, Text: "hi"}},
	{name: "files only", in: `{"channel_id":"12345678901234567","files":["a"]}`, want: Message{ChannelID: "12345678901234567", Files: []string{"a"}}},
	{name: "20 digits", in: `{"channel_id":"18446744073709551615","text":"x"}`, want: Message{ChannelID: "18446744073709551615", Text: "x"}},
	{name: "null is absent", in: `{"channel_id":"123456789012345678","text":"x","files":null}`, want: Message{ChannelID: chanA, Text: "x"}},
	{name: "empty files", in: `{"channel_id":"123456789012345678","text":"x","files":[]}`, want: Message{ChannelID: chanA, Text: "x"}},
	{name: "blank text dropped", in: `{"channel_id":"123456789012345678","text":" \n","files":["a"]}`, want: Message{ChannelID: chanA, Files: []string{"a"}}},
	{name: "surrounding white space", in: "\n {\"channel_id\":\"123456789012345678\",\"text\":\"x\"}\n", want: Message{ChannelID: chanA, Text: "x"}},
	{name: "escaped key", in: `{"channel\u005fid":"123456789012345678","text":"x"}`, want: Message{ChannelID: chanA, Text: "x"}},
	{name: "longest text", in: `{"channel_id":"123456789012345678","text":"` + strings.Repeat("a", MaxText) + `"}`, want: Message{ChannelID: chanA, Text: strings.Repeat("a", MaxText)}},

	{name: "empty", in: ``, wantErr: "not valid JSON: unexpected end of JSON input"},
	{name: "truncated", in: `{"channel_id":"123456789012345678"`, wantErr: "not valid JSON: unexpected end of JSON input"},
	{name: "trailing data", in: `{"channel_id":"123456789012345678","text":"x"} {}`, wantErr: "not valid JSON: invalid character '{' after top-level value"},
	{name: "trailing comma", in: `{"channel_id":"123456789012345678","text":"x",}`, wantErr: "not valid JSON: invalid character '}' looking for beginning of object key string"},
	{name: "array", in: `[{"channel_id":"123456789012345678"}]`, wantErr: "the content must be a JSON object"},
	{name: "unknown field", in: `{"channel_id":"123456789012345678","text":"x","channel":"1"}`, wantErr: `unknown field "channel" (want channel_id, text, files)`},
	{name: "field names are exact", in: `{"Channel_ID":"123456789012345678","text":"x"}`, wantErr: `unknown field "Channel_ID" (want channel_id, text, files)`},
	{name: "duplicate field", in: `{"channel_id":"123456789012345678","text":"x","text":"y"}`, wantErr: `field "text" appears twice`},
	{name: "missing channel", in: `{"text":"x"}`, wantErr: "channel_id is missing"},
	{name: "null channel", in: `{"channel_id":null,"text":"x"}`, wantErr: "channel_id is missing"},
	{name: "number channel", in: `{"channel_id":123456789012345678,"text":"x"}`, wantErr: "channel_id must be a string, not a number: a JSON number cannot hold a Discord id exactly"},
	{name: "bool channel", in: `{"channel_id":true,"text":"x"}`, wantErr: "channel_id must be a string"},
	{name: "short channel", in: `{"channel_id":"1234567890123456","text":"x"}`, wantErr: "channel_id is not a Discord channel id (17 to 20 digits)"},
	{name: "long channel", in: `{"channel_id":"123456789012345678901","text":"x"}`, wantErr: "channel_id is not a Discord channel id (17 to 20 digits)"},
	{name: "channel over uint64", in: `{"channel_id":"18446744073709551616","text":"x"}`, wantErr: "channel_id is not a Discord channel id (17 to 20 digits)"},
	{name: "channel leading zero", in: `{"channel_id":"023456789012345678","text":"x"}`, wantErr: "channel_id is not a Discord channel id (17 to 20 digits)"},
	{name: "channel not digits", in: `{"channel_id":"12345678901234567a","text":"x"}`, wantErr: "channel_id is not a Discord channel id (17 to 20 digits)"},
	{name: "text not string", in: `{"channel_id":"123456789012345678","text":5}`, wantErr: "text must be a string"},
	{name: "text too long", in: `{"channel_id":"123456789012345678","text":"` + strings.Repeat("a", MaxText+1) + `"}`, wantErr: "text: at most 10000 bytes, got 10001"},
	{name: "nothing to post", in: `{"channel_id":"123456789012345678"}`, wantErr: "text and files are both empty: nothing to post"},
	{name: "blank text only", in: `{"channel_id":"123456789012345678","text":"  "}`, wantErr: "text and files are both empty: nothing to post"},
	{name: "files not list", in: `{"channel_id":"123456789012345678","files":"a"}`, wantErr: "files must be a list of paths"},
	{name: "files not strings", in: `{"channel_id":"123456789012345678","files":["a",1]}`, wantErr: "files must be a list of strings"},
	{name: "too many files", in: `{"channel_id":"123456789012345678","files":["1","2","3","4","5","6","7","8","9","10","11","12"]}`, wantErr: "files: at most 10, got 12"},
	{name: "empty path", in: `{"channel_id":"123456789012345678","files":["a",""]}`, wantErr: "files[1] is empty"},
	{name: "NUL in path", in: `{"channel_id":"123456789012345678","files":["a\u0000b"]}`, wantErr: "files[0] contains a NUL byte"},
	{name: "path too long", in: `{"channel_id":"123456789012345678","files":["` + strings.Repeat("a", 4097) + `"]}`, wantErr: "files[0]: at most 4096 bytes, got 4097"},
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, tt := range parseTests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Parse error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, tt := range parseTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte(`{"channel_id":"123456789012345678","text":"\ud800 \xff"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Errorf("error spans lines: %q", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Errorf("accepted invalid JSON %q", data)
		}
		if !isSnowflake(m.ChannelID) || len(m.Files) > MaxFiles || len(m.Text) > MaxText ||
			(m.Text == "" && len(m.Files) == 0) || (m.Files != nil && len(m.Files) == 0) {
			t.Fatalf("invalid message parsed: %+v", m)
		}
		if m.Text != "" && strings.TrimSpace(m.Text) == "" {
			t.Errorf("blank text kept: %q", m.Text)
		}
		for _, p := range m.Files {
			if p == "" || strings.IndexByte(p, 0) >= 0 {
				t.Errorf("invalid path parsed: %q", p)
			}
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := Parse(again)
		if err != nil {
			t.Fatalf("re-encoded message refused: %v\n%s", err, again)
		}
		if diff := cmp.Diff(m, m2); diff != "" {
			t.Errorf("re-encoded message differs (-first +second):\n%s", diff)
		}
	})
}

// post is one call to fakePoster.Post.
type post struct {
	Channel string
	Text    string
	Files   []string
}

// fakePoster records successful posts and fails while told to.
type fakePoster struct {
	mu    sync.Mutex // guards the fields below
	posts []post
	tries int
	fail  map[string]error // by channel: Post returns it
	hook  func()           // called inside Post, if set

	posted chan post // if set, receives every successful post
}

func (p *fakePoster) Post(ctx context.Context, channelID, text string, files []string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tries++
	if p.hook != nil {
		p.hook()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.fail[channelID]; err != nil {
		return err
	}
	p.posts = append(p.posts, post{Channel: channelID, Text: text, Files: files})
	if p.posted != nil {
		p.posted <- post{Channel: channelID, Text: text, Files: files}
	}
	return nil
}

func (p *fakePoster) setFail(channel string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail == nil {
		p.fail = map[string]error{}
	}
	p.fail[channel] = err
}

func (p *fakePoster) got() ([]post, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]post(nil), p.posts...), p.tries
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// env is a Watcher over a temp dir with a fake poster and clock.
type env struct {
	w      *Watcher
	poster *fakePoster
	clock  *clockwork.FakeClock
	dir    string
	logs   *syncBuffer
}

// newEnv builds a Watcher allowing chanA and chanB and resolving files
// under /srv/ unless the path contains "secret". edit may change the
// options first.
func newEnv(t *testing.T, edit func(*Options)) *env {
	t.Helper()
	e := &env{
		poster: &fakePoster{},
		clock:  clockwork.NewFakeClockAt(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)),
		dir:    filepath.Join(t.TempDir(), "ipc"),
		logs:   &syncBuffer{},
	}
	opts := Options{
		Dir:     e.dir,
		Allowed: func(id string) bool { return id == chanA || id == chanB },
		ResolveFile: func(p string) (string, error) {
			if strings.Contains(p, "secret") {
				return "", fmt.Errorf("%s is outside the workspace", p)
			}
			return "/srv/" + p, nil
		},
		Clock: e.clock,
	}
	if edit != nil {
		edit(&opts)
	}
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), e.logs))
	w, err := New(opts, e.poster, log)
	if err != nil {
		t.Fatal(err)
	}
	e.w = w
	return e
}

// drop writes a message file the way writers must: a dot name, then a
// rename into place.
func (e *env) drop(t *testing.T, name, content string) {
	t.Helper()
	tmp := filepath.Join(e.dir, OutboundDir, "."+name+".part")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.dir, OutboundDir, name)); err != nil {
		t.Fatal(err)
	}
}

// ls lists a folder inside the ipc dir.
func (e *env) ls(t *testing.T, sub string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.dir, sub))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// reason reads the reason file of a refused file.
func (e *env) reason(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, FailedDir, name+ReasonSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func msgJSON(channel, text string, files ...string) string {
	b, err := json.Marshal(Message{ChannelID: channel, Text: text, Files: files})
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestNewCreatesPrivateFolders(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, sub := range []string{OutboundDir, FailedDir} {
		fi, err := os.Stat(filepath.Join(e.dir, sub))
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want a directory no one else may open", sub, fi.Mode())
		}
	}
}

func TestNewRequiresOptions(t *testing.T) {
	t.Parallel()
	allow := func(string) bool { return true }
	for name, tt := range map[string]struct {
		opts Options
		post Poster
	}{
		"no dir":     {opts: Options{Allowed: allow}, post: &fakePoster{}},
		"no allowed": {opts: Options{Dir: t.TempDir()}, post: &fakePoster{}},
		"no poster":  {opts: Options{Dir: t.TempDir(), Allowed: allow}},
	} {
		if _, err := New(tt.opts, tt.post, zerolog.Nop()); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

func TestScanPostsAndRemoves(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.drop(t, "backup.json", `{"channel_id": "123456789012345678", "text": "Backup finished", "files": ["reports/backup.log"]}`)
	e.w.Scan(context.Background())

	posts, _ := e.poster.got()
	want := []post{{Channel: chanA, Text: "Backup finished", Files: []string{"/srv/reports/backup.log"}}}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	if got := e.ls(t, OutboundDir); len(got) != 0 {
		t.Errorf("outbound/ holds %q after the post, want nothing", got)
	}
	if got := e.ls(t, FailedDir); len(got) != 0 {
		t.Errorf("failed/ holds %q, want nothing", got)
	}
}

// TestScanRefuses: every file that can never be posted goes to failed/ with
// its reason, is not posted, and the warning names it without its content.
func TestScanRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		content string
		edit    func(*Options)
		reason  string
	}{
		{
			name:    "malformed",
			content: `{"channel_id": "123456789012345678", "text": "the private words",}`,
			reason:  "not valid JSON: invalid character '}' looking for beginning of object key string",
		},
		{
			name:    "invalid field",
			content: `{"channel_id": 123456789012345678, "text": "the private words"}`,
			reason:  "channel_id must be a string, not a number: a JSON number cannot hold a Discord id exactly",
		},
		{
			name:    "channel not allowed",
			content: msgJSON("999999999999999999", "the private words"),
			reason:  "channel 999999999999999999 is not allowed",
		},
		{
			name:    "file refused",
			content: msgJSON(chanA, "the private words", "ok.log", "../secret\nkey"),
			reason:  "files[1]: ../secret key is outside the workspace",
		},
		{
			name:    "attachments turned off",
			content: msgJSON(chanA, "the private words", "ok.log"),
			edit:    func(o *Options) { o.ResolveFile = nil },
			reason:  "files are not accepted: attachments are turned off",
		},
		{
			name:    "oversized",
			content: msgJSON(chanA, "the private words"+strings.Repeat(" ", DefaultMaxSize)),
			reason:  "the file is larger than 65536 bytes",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.edit)
			e.drop(t, "msg.json", tt.content)
			e.w.Scan(context.Background())

			if posts, tries := e.poster.got(); tries != 0 {
				t.Errorf("posted %+v, want nothing", posts)
			}
			if got := e.ls(t, OutboundDir); len(got) != 0 {
				t.Errorf("outbound/ holds %q, want nothing", got)
			}
			if diff := cmp.Diff([]string{"msg.json", "msg.json" + ReasonSuffix}, e.ls(t, FailedDir)); diff != "" {
				t.Errorf("failed/ (-want +got):\n%s", diff)
			}
			if got := e.reason(t, "msg.json"); got != tt.reason+"\n" {
				t.Errorf("reason = %q, want %q", got, tt.reason+"\n")
			}
			moved, err := os.ReadFile(filepath.Join(e.dir, FailedDir, "msg.json"))
			if err != nil || string(moved) != tt.content {
				t.Errorf("failed/msg.json holds %q (%v), want the original content", moved, err)
			}
			logs := e.logs.String()
			if !strings.Contains(logs, `"file":"msg.json"`) || !strings.Contains(logs, `"level":"warn"`) {
				t.Errorf("no warning naming the file in the log:\n%s", logs)
			}
			if strings.Contains(logs, "private words") {
				t.Errorf("the log holds the file's content:\n%s", logs)
			}

			// Never retried: later scans leave failed/ alone.
			e.clock.Advance(time.Hour)
			e.w.Scan(context.Background())
			if got := e.ls(t, FailedDir); len(got) != 2 {
				t.Errorf("failed/ holds %q after another scan", got)
			}
		})
	}
}

func TestScanRefusesNonRegular(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	target := filepath.Join(t.TempDir(), "target.json")
	content := msgJSON(chanA, "through a link")
	if err := os.WriteFile(target, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(e.dir, OutboundDir, "link.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(e.dir, OutboundDir, "dir.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	e.w.Scan(context.Background())

	if posts, tries := e.poster.got(); tries != 0 {
		t.Errorf("posted %+v, want nothing", posts)
	}
	want := []string{"dir.json", "dir.json" + ReasonSuffix, "link.json", "link.json" + ReasonSuffix}
	if diff := cmp.Diff(want, e.ls(t, FailedDir)); diff != "" {
		t.Errorf("failed/ (-want +got):\n%s", diff)
	}
	for _, name := range []string{"dir.json", "link.json"} {
		if got := e.reason(t, name); got != "not a regular file\n" {
			t.Errorf("%s: reason %q", name, got)
		}
	}
	fi, err := os.Lstat(filepath.Join(e.dir, FailedDir, "link.json"))
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("failed/link.json is not the link itself: %v, %v", fi, err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != content {
		t.Errorf("link target changed: %q, %v", b, err)
	}
}

// TestReadRefusesSymlinkSwappedIn: a symlink put in place after the listing
// is not followed.
func TestReadRefusesSymlinkSwappedIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.drop(t, "a.json", msgJSON(chanA, "x"))
	path := filepath.Join(e.dir, OutboundDir, "a.json")
	listed, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(t.TempDir(), "t.json")
	if err := os.WriteFile(target, []byte(msgJSON(chanA, "y")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.w.read("a.json", listed); !errors.Is(err, errNotRegular) {
		t.Errorf("read through a swapped-in symlink: %v, want %v", err, errNotRegular)
	}
}

func TestScanIgnoresUnfinishedNames(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	names := []string{".hidden.json", "a.json.tmp", "b.tmp", "notes.txt", "c.JSON"}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(e.dir, OutboundDir, name), []byte(msgJSON(chanA, name)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.w.Scan(context.Background())

	if posts, tries := e.poster.got(); tries != 0 {
		t.Errorf("posted %+v, want nothing", posts)
	}
	got := e.ls(t, OutboundDir)
	if diff := cmp.Diff([]string{".hidden.json", "a.json.tmp", "b.tmp", "c.JSON", "notes.txt"}, got); diff != "" {
		t.Errorf("outbound/ (-want +got):\n%s", diff)
	}
	if got := e.ls(t, FailedDir); len(got) != 0 {
		t.Errorf("failed/ holds %q, want nothing", got)
	}
}

func TestScanPostsInNameOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	for _, name := range []string{"003-c.json", "001-a.json", "010-d.json", "002-b.json"} {
		e.drop(t, name, msgJSON(chanA, name))
	}
	e.w.Scan(context.Background())

	posts, _ := e.poster.got()
	var texts []string
	for _, p := range posts {
		texts = append(texts, p.Text)
	}
	if diff := cmp.Diff([]string{"001-a.json", "002-b.json", "003-c.json", "010-d.json"}, texts); diff != "" {
		t.Errorf("post order (-want +got):\n%s", diff)
	}
}

func TestScanRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.poster.setFail(chanA, errors.New("discord: 503 Service Unavailable"))
	e.drop(t, "a.json", msgJSON(chanA, "hello"))
	ctx := context.Background()

	e.w.Scan(ctx)
	if _, tries := e.poster.got(); tries != 1 {
		t.Fatalf("tries = %d after the first scan, want 1", tries)
	}
	if diff := cmp.Diff([]string{"a.json"}, e.ls(t, OutboundDir)); diff != "" {
		t.Fatalf("outbound/ after a failed post (-want +got):\n%s", diff)
	}

	// Within the backoff the file is left alone; each step doubles it.
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		e.clock.Advance(wait - time.Millisecond)
		e.w.Scan(ctx)
		if _, tries := e.poster.got(); tries != i+1 {
			t.Fatalf("tried again %v into a %v backoff", wait-time.Millisecond, wait)
		}
		e.clock.Advance(time.Millisecond)
		e.w.Scan(ctx)
		if _, tries := e.poster.got(); tries != i+2 {
			t.Fatalf("not tried again after a %v backoff: %d tries", wait, tries)
		}
	}
	if n := strings.Count(e.logs.String(), "posting outbound message failed"); n != 4 {
		t.Errorf("%d failure warnings for 4 failures:\n%s", n, e.logs.String())
	}

	e.poster.setFail(chanA, nil)
	e.clock.Advance(16 * time.Second)
	e.w.Scan(ctx)
	posts, _ := e.poster.got()
	if diff := cmp.Diff([]post{{Channel: chanA, Text: "hello"}}, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
	if got := e.ls(t, OutboundDir); len(got) != 0 {
		t.Errorf("outbound/ holds %q after the post, want nothing", got)
	}
}

// TestScanKeepsChannelOrder: while a file waits for a retry, later files
// for its channel wait too; other channels go on.
func TestScanKeepsChannelOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.poster.setFail(chanA, errors.New("discord down for this channel"))
	e.drop(t, "001.json", msgJSON(chanA, "first"))
	e.drop(t, "002.json", msgJSON(chanA, "second"))
	e.drop(t, "003.json", msgJSON(chanB, "other"))
	ctx := context.Background()

	e.w.Scan(ctx)
	posts, tries := e.poster.got()
	if diff := cmp.Diff([]post{{Channel: chanB, Text: "other"}}, posts); diff != "" || tries != 2 {
		t.Errorf("posts after the first scan, %d tries (-want +got):\n%s", tries, diff)
	}
	e.clock.Advance(time.Second)
	e.w.Scan(ctx) // 001 waits for its retry, so 002 waits too
	if _, tries := e.poster.got(); tries != 2 {
		t.Errorf("tries = %d during the backoff, want 2", tries)
	}

	e.poster.setFail(chanA, nil)
	e.clock.Advance(time.Second)
	e.w.Scan(ctx)
	posts, _ = e.poster.got()
	want := []post{{Channel: chanB, Text: "other"}, {Channel: chanA, Text: "first"}, {Channel: chanA, Text: "second"}}
	if diff := cmp.Diff(want, posts); diff != "" {
		t.Errorf("posts (-want +got):\n%s", diff)
	}
}

func TestScanGivesUp(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.GiveUpAfter = time.Hour })
	e.poster.setFail(chanA, errors.New("discord: 403 Missing Access"))
	e.drop(t, "a.json", msgJSON(chanA, "hello"))
	ctx := context.Background()

	e.w.Scan(ctx)
	for i := 0; i < 100 && len(e.ls(t, OutboundDir)) > 0; i++ {
		e.clock.Advance(maxBackoff)
		e.w.Scan(ctx)
	}
	if diff := cmp.Diff([]string{"a.json", "a.json" + ReasonSuffix}, e.ls(t, FailedDir)); diff != "" {
		t.Fatalf("failed/ (-want +got):\n%s", diff)
	}
	// One try every scan, 5 minutes apart (past every backoff), from 0
	// to 60 minutes.
	_, tries := e.poster.got()
	if tries != 13 {
		t.Errorf("%d tries in an hour, want 13", tries)
	}
	want := fmt.Sprintf("posting failed for 1h0m0s (%d tries), last error: discord: 403 Missing Access\n", tries)
	if got := e.reason(t, "a.json"); got != want {
		t.Errorf("reason = %q, want %q", got, want)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for n := 1; n <= 10; n++ {
		got = append(got, backoff(n))
	}
	s := time.Second
	want := []time.Duration{2 * s, 4 * s, 8 * s, 16 * s, 32 * s, 64 * s, 128 * s, 256 * s, 5 * time.Minute, 5 * time.Minute}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
	if backoff(1000) != maxBackoff {
		t.Errorf("backoff(1000) = %v", backoff(1000))
	}
}

func TestScanLimitsFilesPerScan(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.MaxPerScan = 3 })
	for i := range 5 {
		e.drop(t, fmt.Sprintf("%03d.json", i), msgJSON(chanA, fmt.Sprint(i)))
	}
	e.drop(t, "000-bad.json", "{")
	e.w.Scan(context.Background())

	// The refused file counts: two posts.
	if posts, _ := e.poster.got(); len(posts) != 2 {
		t.Errorf("%d posts in the first scan, want 2", len(posts))
	}
	if got := e.ls(t, OutboundDir); len(got) != 3 {
		t.Errorf("outbound/ holds %q after the first scan, want 3 files", got)
	}
	e.w.Scan(context.Background())
	posts, _ := e.poster.got()
	if len(posts) != 5 || posts[4].Text != "4" {
		t.Errorf("posts after the second scan: %+v", posts)
	}
}

func TestScanFailedNameTaken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	failed := filepath.Join(e.dir, FailedDir)
	for name, content := range map[string]string{"bad.json": "old", "bad-1.json" + ReasonSuffix: "old reason"} {
		if err := os.WriteFile(filepath.Join(failed, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	e.drop(t, "bad.json", "{")
	e.w.Scan(context.Background())

	want := []string{"bad-1.json.reason.txt", "bad-2.json", "bad-2.json.reason.txt", "bad.json"}
	if diff := cmp.Diff(want, e.ls(t, FailedDir)); diff != "" {
		t.Errorf("failed/ (-want +got):\n%s", diff)
	}
	for name, content := range map[string]string{"bad.json": "old", "bad-1.json" + ReasonSuffix: "old reason", "bad-2.json": "{"} {
		if b, _ := os.ReadFile(filepath.Join(failed, name)); string(b) != content {
			t.Errorf("%s holds %q, want %q", name, b, content)
		}
	}
}

func TestScanRespectsContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.drop(t, "a.json", msgJSON(chanA, "a"))
	e.drop(t, "b.json", msgJSON(chanA, "b"))
	ctx, cancel := context.WithCancel(context.Background())
	// Shut down while the first post is in flight: it fails, but that is
	// no reason to back off or refuse.
	e.poster.hook = cancel
	e.w.Scan(ctx)
	if posts, tries := e.poster.got(); tries != 1 || len(posts) != 0 {
		t.Errorf("%d tries, posts %+v; want one cut-short try", tries, posts)
	}
	if diff := cmp.Diff([]string{"a.json", "b.json"}, e.ls(t, OutboundDir)); diff != "" {
		t.Errorf("outbound/ (-want +got):\n%s", diff)
	}

	e.poster.hook = nil
	e.w.Scan(context.Background())
	if posts, _ := e.poster.got(); len(posts) != 2 {
		t.Errorf("posts after the next scan: %+v, want both", posts)
	}
}

// TestScanPostedFileNotRemovable: a file posted but not removable (the
// folder is read-only) is not posted again on the next scans.
func TestScanPostedFileNotRemovable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may remove files from a read-only folder")
	}
	t.Parallel()
	e := newEnv(t, nil)
	e.drop(t, "a.json", msgJSON(chanA, "once"))
	outbound := filepath.Join(e.dir, OutboundDir)
	if err := os.Chmod(outbound, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(outbound, 0o700) })

	for range 3 {
		e.w.Scan(context.Background())
	}
	if posts, _ := e.poster.got(); len(posts) != 1 {
		t.Errorf("posted %d times, want once", len(posts))
	}
	if n := strings.Count(e.logs.String(), "cannot remove posted message file"); n != 1 {
		t.Errorf("%d removal errors logged, want 1", n)
	}

	if err := os.Chmod(outbound, 0o700); err != nil {
		t.Fatal(err)
	}
	e.w.Scan(context.Background())
	if got := e.ls(t, OutboundDir); len(got) != 0 {
		t.Errorf("outbound/ holds %q once removable, want nothing", got)
	}
	if posts, _ := e.poster.got(); len(posts) != 1 {
		t.Errorf("posted %d times, want once", len(posts))
	}
}

func TestRunScansEveryInterval(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.poster.posted = make(chan post, 10)
	e.drop(t, "a.json", msgJSON(chanA, "first"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.w.Run(ctx) }()

	waitPost := func(want string) {
		t.Helper()
		select {
		case p := <-e.poster.posted:
			if p.Text != want {
				t.Fatalf("posted %q, want %q", p.Text, want)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("%q not posted before the deadline", want)
		}
	}
	waitPost("first") // the first scan runs at once

	waitCtx, waitCancel := context.WithTimeout(context.Background(), waitTimeout)
	defer waitCancel()
	if err := e.clock.BlockUntilContext(waitCtx, 1); err != nil {
		t.Fatalf("Run never waited on its ticker: %v", err)
	}
	e.drop(t, "b.json", msgJSON(chanA, "second"))
	e.clock.Advance(DefaultInterval)
	waitPost("second")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Run did not return after its context ended")
	}
}
