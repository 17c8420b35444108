// Package sdnotify tells systemd about the service's state, as
// sd_notify(3) does: READY=1 once it serves, STOPPING=1 when it begins to
// shut down, and WATCHDOG=1 at half the watchdog interval (WatchdogSec=).
// Each message is one datagram to the unix socket $NOTIFY_SOCKET names; a
// name starting with @ is in the abstract namespace. Without
// NOTIFY_SOCKET, outside systemd or under a unit that is not Type=notify,
// every call does nothing.
//
// A Notifier holds no connection, only the socket's address and the
// watchdog's interval, so its methods may be called from any goroutine.
package sdnotify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Environment variables systemd sets for a Type=notify service.
const (
	// EnvSocket names the socket to send state to.
	EnvSocket = "NOTIFY_SOCKET"
	// EnvWatchdogUSec is the watchdog interval in microseconds.
	EnvWatchdogUSec = "WATCHDOG_USEC"
	// EnvWatchdogPID is the process the watchdog is meant for; another
	// one (a child that inherited the environment) must not ping.
	EnvWatchdogPID = "WATCHDOG_PID"
)

// Notifier sends state messages to the service manager. The zero value,
// and a nil *Notifier, send nothing.
type Notifier struct {
	socket   string
	watchdog time.Duration
}

// New reads the socket and watchdog interval from getenv (os.Getenv in
// production). The watchdog is off when WATCHDOG_USEC is unset or not a
// positive number, or WATCHDOG_PID names another process than pid.
func New(getenv func(string) string, pid int) *Notifier {
	n := &Notifier{socket: getenv(EnvSocket)}
	if n.socket == "" {
		return n
	}
	if p := getenv(EnvWatchdogPID); p != "" && p != strconv.Itoa(pid) {
		return n
	}
	usec, err := strconv.ParseInt(getenv(EnvWatchdogUSec), 10, 64)
	if err == nil && usec > 0 {
		n.watchdog = time.Duration(usec) * time.Microsecond
	}
	return n
}

// FromEnv is New for this process.
func FromEnv() *Notifier { return New(os.Getenv, os.Getpid()) }

// Enabled reports whether there is a service manager to notify.
func (n *Notifier) Enabled() bool { return n != nil && n.socket != "" }

// Ready tells the service manager that start-up is done (READY=1); with
// Type=notify, systemd counts the unit as started only then.
func (n *Notifier) Ready() error { return n.Notify("READY=1") }

// Stopping tells the service manager that the shutdown has begun
// (STOPPING=1), so that `systemctl status` shows "deactivating" during the
// drain.
func (n *Notifier) Stopping() error { return n.Notify("STOPPING=1") }

// Watchdog tells the service manager the service is alive (WATCHDOG=1).
func (n *Notifier) Watchdog() error { return n.Notify("WATCHDOG=1") }

// WatchdogInterval is how often RunWatchdog pings: half of WATCHDOG_USEC,
// as sd_watchdog_enabled(3) advises, so that one late ping is not fatal.
// Zero means the watchdog is off.
func (n *Notifier) WatchdogInterval() time.Duration {
	if !n.Enabled() {
		return 0
	}
	return n.watchdog / 2
}

// RunWatchdog pings the watchdog every WatchdogInterval until ctx ends,
// and returns at once when the watchdog is off. A failed ping is passed to
// onError (which may be nil) and the loop goes on: the next one may work,
// and if none does systemd restarts the service, as it should.
func (n *Notifier) RunWatchdog(ctx context.Context, onError func(error)) {
	every := n.WatchdogInterval()
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := n.Watchdog(); err != nil && onError != nil {
			onError(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ErrNotDatagram reports a NOTIFY_SOCKET that is not a unix socket path
// or abstract name (systemd also allows vsock: addresses, for virtual
// machines, which this package does not speak).
var ErrNotDatagram = errors.New("NOTIFY_SOCKET is not a unix socket")

// Notify sends state, one or more NAME=value lines, to the service
// manager. It does nothing without one.
func (n *Notifier) Notify(state string) error {
	if !n.Enabled() {
		return nil
	}
	if n.socket[0] != '/' && n.socket[0] != '@' {
		return fmt.Errorf("notify %s: %w", n.socket, ErrNotDatagram)
	}
	// net turns a leading @ into the NUL of an abstract address.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return fmt.Errorf("notify systemd: %w", err)
	}
	return nil
}
