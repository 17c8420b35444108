// Package readmetest keeps the README's generated tables in step with the
// code they describe: a test compares the text between two markers with
// what the code makes, and rewrites it when asked (-update-readme).
package readmetest

import (
	"os"
	"strings"
	"testing"
)

// Section checks that the README at path holds want between the start
// and end markers. With update it rewrites that part instead; otherwise a
// difference fails the test with how to regenerate it.
func Section(t *testing.T, path, start, end, want string, update bool, regenerate string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i, j := strings.Index(readme, start), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no section between %q and %q", path, strings.TrimSpace(start), end)
	}
	if readme[i+len(start):j] == want {
		return
	}
	if update {
		if err := os.WriteFile(path, []byte(readme[:i+len(start)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date between %q and %q; run %s", path, strings.TrimSpace(start), end, regenerate)
}
