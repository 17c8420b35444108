package dirlock

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSecondLockFailsNamingTheHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Acquire(dir, "gateway run")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()

	second, err := Acquire(dir, "gateway chat")
	var held *HeldError
	if !errors.As(err, &held) {
		second.Release()
		t.Fatalf("second Acquire = %v, want a *HeldError", err)
	}
	want := &HeldError{Dir: dir, PID: os.Getpid(), Command: "gateway run"}
	if diff := cmp.Diff(want, held); diff != "" {
		t.Errorf("HeldError (-want +got):\n%s", diff)
	}
	for _, s := range []string{dir, "pid " + strconv.Itoa(os.Getpid()), "gateway run", "CONFIG_DIR"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("message %q lacks %q", err, s)
		}
	}
}

func TestReleaseLetsTheNextOneIn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := Acquire(dir, "gateway run")
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	second, err := Acquire(dir, "gateway chat")
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	second.Release()
}

func TestUnknownHolder(t *testing.T) {
	t.Parallel()
	if got := (&HeldError{Dir: "/srv/config"}).Error(); !strings.Contains(got, "in use by another gateway:") {
		t.Errorf("message = %q", got)
	}
}

func TestMissingDirectory(t *testing.T) {
	t.Parallel()
	if _, err := Acquire(t.TempDir()+"/nope", "gateway run"); err == nil {
		t.Error("Acquire in a missing directory succeeded")
	}
}
