package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen opens a unixgram socket at name, as systemd does for
// NOTIFY_SOCKET, and returns it with its address.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// receive returns the next datagram, failing after a deadline.
func receive(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	return string(buf[:n])
}

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestNotifyStates(t *testing.T) {
	for _, tc := range []struct{ name, socket string }{
		{"path", filepath.Join(t.TempDir(), "notify.sock")},
		{"abstract", fmt.Sprintf("@gateway-sdnotify-test-%d-%d", os.Getpid(), time.Now().UnixNano())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := listen(t, tc.socket)
			n := New(env(map[string]string{EnvSocket: tc.socket}), os.Getpid())
			if !n.Enabled() {
				t.Fatal("not enabled with NOTIFY_SOCKET set")
			}
			for _, step := range []struct {
				send func() error
				want string
			}{
				{n.Ready, "READY=1"},
				{n.Watchdog, "WATCHDOG=1"},
				{n.Stopping, "STOPPING=1"},
			} {
				if err := step.send(); err != nil {
					t.Fatalf("%s: %v", step.want, err)
				}
				if got := receive(t, conn); got != step.want {
					t.Errorf("received %q, want %q", got, step.want)
				}
			}
		})
	}
}

func TestWithoutSocketEverythingIsANoOp(t *testing.T) {
	for _, n := range []*Notifier{nil, {}, New(env(nil), 1)} {
		if n.Enabled() {
			t.Errorf("%+v is enabled", n)
		}
		for _, f := range []func() error{n.Ready, n.Stopping, n.Watchdog} {
			if err := f(); err != nil {
				t.Errorf("%+v: %v", n, err)
			}
		}
		if d := n.WatchdogInterval(); d != 0 {
			t.Errorf("watchdog interval %v without a socket", d)
		}
		n.RunWatchdog(context.Background(), nil) // returns at once
	}
}

func TestNotifyErrors(t *testing.T) {
	gone := New(env(map[string]string{EnvSocket: filepath.Join(t.TempDir(), "gone.sock")}), 1)
	if err := gone.Ready(); err == nil {
		t.Error("Ready to a socket that does not exist did not fail")
	}
	vsock := New(env(map[string]string{EnvSocket: "vsock:2:1234"}), 1)
	if err := vsock.Ready(); !errors.Is(err, ErrNotDatagram) {
		t.Errorf("Ready to a vsock address: %v, want ErrNotDatagram", err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	const sock = "/run/notify"
	pid := 42
	for _, tc := range []struct {
		name string
		env  map[string]string
		want time.Duration
	}{
		{"half of WATCHDOG_USEC", map[string]string{EnvSocket: sock, EnvWatchdogUSec: "60000000"}, 30 * time.Second},
		{"for this pid", map[string]string{EnvSocket: sock, EnvWatchdogUSec: "60000000", EnvWatchdogPID: strconv.Itoa(pid)}, 30 * time.Second},
		{"for another pid", map[string]string{EnvSocket: sock, EnvWatchdogUSec: "60000000", EnvWatchdogPID: "7"}, 0},
		{"no WATCHDOG_USEC", map[string]string{EnvSocket: sock}, 0},
		{"bad WATCHDOG_USEC", map[string]string{EnvSocket: sock, EnvWatchdogUSec: "soon"}, 0},
		{"zero WATCHDOG_USEC", map[string]string{EnvSocket: sock, EnvWatchdogUSec: "0"}, 0},
		{"no socket", map[string]string{EnvWatchdogUSec: "60000000"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := New(env(tc.env), pid).WatchdogInterval(); got != tc.want {
				t.Errorf("WatchdogInterval = %v, want %v", got, tc.want)
			}
		})
	}
}

// RunWatchdog pings at once and then on every tick, and returns when its
// context ends.
func TestRunWatchdog(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn := listen(t, sock)
	// A 2 ms watchdog: a ping every millisecond.
	n := New(env(map[string]string{EnvSocket: sock, EnvWatchdogUSec: "2000"}), 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.RunWatchdog(ctx, func(err error) { t.Errorf("ping failed: %v", err) })
	}()
	for range 3 {
		if got := receive(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("received %q, want WATCHDOG=1", got)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("RunWatchdog did not return after its context ended")
	}
}

// A failed ping is reported and the loop goes on.
func TestRunWatchdogReportsFailures(t *testing.T) {
	n := New(env(map[string]string{EnvSocket: filepath.Join(t.TempDir(), "gone.sock"), EnvWatchdogUSec: "2000"}), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	failures := make(chan error, 16)
	go n.RunWatchdog(ctx, func(err error) {
		select {
		case failures <- err:
		default:
		}
	})
	for range 2 {
		select {
		case err := <-failures:
			if err == nil {
				t.Fatal("nil error reported")
			}
		case <-time.After(5 * time.Second):
			t.Fatal("failed pings not reported")
		}
	}
}
