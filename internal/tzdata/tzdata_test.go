package tzdata

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func embeddedZip(t *testing.T) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(zoneinfoZipGz))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The embedded archive is the one time/tzdata would embed for this Go
// release.
func TestMatchesGoroot(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(runtime.GOROOT(), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Skipf("no zoneinfo.zip in GOROOT to compare with: %v", err)
	}
	if !bytes.Equal(embeddedZip(t), want) {
		t.Errorf("zoneinfo.zip.gz is not this Go release's lib/time/zoneinfo.zip; refresh it with\n" +
			`  gzip -9 -n -c "$(go env GOROOT)/lib/time/zoneinfo.zip" > internal/tzdata/zoneinfo.zip.gz`)
	}
}

func TestLoadEveryZone(t *testing.T) {
	raw := embeddedZip(t)
	zr, err := zip.NewReader(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) < 100 {
		t.Fatalf("only %d zones in the embedded archive", len(zr.File))
	}
	for _, f := range zr.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		want, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		got, err := load(f.Name)
		if err != nil {
			t.Fatalf("load(%q): %v", f.Name, err)
		}
		if got != string(want) {
			t.Fatalf("load(%q) returned %d bytes, not the archive's %d", f.Name, len(got), len(want))
		}
	}
}

func TestLoadGivesUsableZone(t *testing.T) {
	data, err := load("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocationFromTZData("Europe/Berlin", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	summer := time.Date(2024, 7, 1, 12, 0, 0, 0, time.UTC).In(loc)
	if name, offset := summer.Zone(); name != "CEST" || offset != 2*60*60 {
		t.Errorf("Europe/Berlin in July = %s %+d, want CEST +7200", name, offset)
	}
}

func TestLoadUnknownZone(t *testing.T) {
	for _, name := range []string{"Mars/Olympus", "", "Europe"} {
		if _, err := load(name); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("load(%q) = %v, want ENOENT", name, err)
		}
	}
}

func TestFindRejectsCorruptArchive(t *testing.T) {
	if _, err := find(bytes.NewReader([]byte("not gzip")), "UTC"); !errors.Is(err, errCorrupt) {
		t.Errorf("find on non-gzip input = %v, want errCorrupt", err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(embeddedZip(t)[:100]) // cut inside the first entry
	zw.Close()
	if _, err := find(&buf, "UTC"); !errors.Is(err, errCorrupt) {
		t.Errorf("find on a truncated archive = %v, want errCorrupt", err)
	}
}
