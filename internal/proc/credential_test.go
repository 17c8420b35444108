package proc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCredential runs a process as nobody (65534) and stops it: it runs
// with that uid and group and no supplementary groups, and cancelling still
// kills its whole group, grandchildren included, though they are not the
// caller's user.
func TestCredential(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	const nobody = 65534
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startSh(t, ctx, `sleep 100 & echo "$(id -u) $(id -g) $(id -G) $!"; wait`, func(s *Spec) {
		s.Credential = &Credential{UID: nobody, GID: nobody}
		s.Dir = "/"
	})
	line, err := bufio.NewReader(p.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (stderr: %s)", err, p.StderrTail())
	}
	f := strings.Fields(line)
	want := fmt.Sprint(nobody)
	if len(f) != 4 || f[0] != want || f[1] != want || f[2] != want {
		t.Fatalf("id = %q, want uid, gid and groups %d only", line, nobody)
	}
	grandchild, err := strconv.Atoi(f[3])
	if err != nil {
		t.Fatal(err)
	}
	if gpg, _ := syscall.Getpgid(grandchild); gpg != p.Pid() {
		t.Fatalf("grandchild %d in group %d, want %d", grandchild, gpg, p.Pid())
	}
	cancel()
	if _, err := waitExit(t, p, 10*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	waitFor(t, 5*time.Second, "process group to be gone", func() bool { return groupGone(p.Pid()) })
}

func TestCredentialNilKeepsCallersUser(t *testing.T) {
	p := startSh(t, context.Background(), `id -u`, nil)
	out, err := io.ReadAll(p.Stdout())
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(os.Geteuid()) {
		t.Errorf("id -u = %q, want %d", got, os.Geteuid())
	}
}
