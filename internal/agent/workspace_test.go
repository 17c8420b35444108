package agent

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/session"
)

// workspaces stands for the worktrees: it moves the turns of channel
// "thread" into a folder of their own, and says why when it cannot.
type workspaces struct {
	mu    sync.Mutex // guards asked
	asked []string   // "<channel> <dir>" per call
	dir   string     // where thread turns go; "" keeps the given dir
	note  string
}

func (w *workspaces) WorkDir(_ context.Context, e queue.Event, dir string) (string, string) {
	w.mu.Lock()
	w.asked = append(w.asked, e.ChannelID+" "+dir)
	w.mu.Unlock()
	if e.ChannelID != "thread" {
		return "", ""
	}
	return w.dir, w.note
}

// A prompt's turn runs where the workspace says, given the channel's
// project (else WORK_DIR); a scheduled event is never asked about; a note
// is a line above the reply.
func TestWorkspaceChoosesTheWorkDir(t *testing.T) {
	work, project, worktree := t.TempDir(), t.TempDir(), t.TempDir()
	ws := &workspaces{dir: worktree}
	f := newFixture(t, Options{WorkDir: work, Workspace: ws}, nil)
	if _, _, err := f.sessions.UpdateSettings("thread", func(s *session.Settings) { s.Project = project }); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f.rt.Process(ctx, message("thread", "in the thread"))
	f.rt.Process(ctx, message("channel", "in a channel"))
	f.rt.Process(ctx, queue.Event{ID: 9, Kind: queue.KindHeartbeat, ChannelID: "thread", Text: "check"})
	ws.note, ws.dir = "No worktree: the project has no commit yet; this thread works in the checkout.", ""
	f.rt.Process(ctx, message("thread", "again"))

	var dirs []string
	for _, r := range f.fake.Requests() {
		dirs = append(dirs, r.WorkDir)
	}
	if diff := cmp.Diff([]string{worktree, work, work, project}, dirs); diff != "" {
		t.Errorf("work dirs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"thread " + project, "channel " + work, "thread " + project}, ws.asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
	if got := f.out.last("thread"); !strings.HasPrefix(got, "_(No worktree: the project has no commit yet; this thread works in the checkout.)_\n\necho: again") {
		t.Errorf("reply with a note = %q", got)
	}
	if b, _ := f.sessions.Get("thread"); b.WorkDir != project {
		t.Errorf("the session is bound in %s, want where its last turn ran", b.WorkDir)
	}
}
