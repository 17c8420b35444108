package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every duration the gateway logs says its unit: an Int64 of milliseconds
// under a key ending in "_ms", never zerolog's Dur (a float whose unit is
// a package global: "took=26815.801835").
func TestDurationsAreLoggedInMilliseconds(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	dur := regexp.MustCompile(`\bDurs?\("`)
	msKey := regexp.MustCompile(`Int64\("([a-z_]+)", [^\n]*\.Milliseconds\(\)\)`)
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for i, line := range strings.Split(string(src), "\n") {
			if dur.MatchString(line) {
				t.Errorf("%s:%d logs a duration with Dur: use Int64(\"<name>_ms\", d.Milliseconds())", path, i+1)
			}
			for _, m := range msKey.FindAllStringSubmatch(line, -1) {
				if !strings.HasSuffix(m[1], "_ms") {
					t.Errorf("%s:%d logs milliseconds under %q: end the key in _ms", path, i+1, m[1])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d Go files under %s; the walk missed the module", scanned, root)
	}
}
