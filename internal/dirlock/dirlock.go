// Package dirlock gives one process at a time a directory: an exclusive,
// non-blocking flock(2) on a lock file inside it. The kernel drops the lock
// when the process exits, however it exits, so a crash never leaves a stale
// lock behind; the file itself stays and only records the holder's pid.
//
// flock locks belong to an open file description, so two Acquire calls in
// one process conflict just as two processes do. A Lock is safe for use by
// one goroutine; Release may be called more than once.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// FileName is the lock file inside the locked directory.
const FileName = ".gateway.lock"

// HeldError says that another process holds the directory.
type HeldError struct {
	// Dir is the locked directory.
	Dir string
	// PID is the holder's process id as it recorded it; 0 when unknown.
	PID int
	// Command is what the holder recorded it runs (e.g. "gateway run").
	Command string
}

func (e *HeldError) Error() string {
	who := "another gateway"
	switch {
	case e.PID > 0 && e.Command != "":
		who = fmt.Sprintf("another gateway (pid %d, %s)", e.PID, e.Command)
	case e.PID > 0:
		who = fmt.Sprintf("another gateway (pid %d)", e.PID)
	}
	return fmt.Sprintf("%s is in use by %s: two gateways on one CONFIG_DIR overwrite each other's sessions and state; stop the other one or give this one its own CONFIG_DIR", e.Dir, who)
}

// Lock is a held directory lock.
type Lock struct {
	f *os.File
}

// Acquire locks dir (which must exist) for this process and records the
// pid and command in the lock file. It does not wait: when another process
// holds the lock it returns a *HeldError naming it.
func Acquire(dir, command string) (*Lock, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			held := &HeldError{Dir: dir}
			held.PID, held.Command = readHolder(f)
			return nil, held
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	// Record who holds it, for the message another process shows.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+" "+command+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// readHolder reads the pid and command a holder wrote.
func readHolder(f *os.File) (int, string) {
	buf := make([]byte, 256)
	n, _ := f.ReadAt(buf, 0)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	pid, command, _ := strings.Cut(strings.TrimSpace(line), " ")
	p, err := strconv.Atoi(pid)
	if err != nil || p <= 0 {
		return 0, ""
	}
	return p, strings.TrimSpace(command)
}

// Release gives the directory up. The lock file stays: removing it would
// let a third process lock a new file while a second still waits on the
// old one.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor drops the flock
	l.f = nil
	return err
}
