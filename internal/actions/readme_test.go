package actions

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's table of actions from the catalog")

// The README's table of actions is made from the catalog, so that it lists
// every type, its flag, its default and what needs a person's
// confirmation, and cannot drift: go test ./internal/actions -update-readme
// rewrites it.
func TestREADMEListsEveryAction(t *testing.T) {
	const path = "../../README.md"
	const start, end = "<!-- actions table: made by go test ./internal/actions -update-readme -->\n", "<!-- end of actions table -->"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	i, j := strings.Index(readme, start), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("README.md has no actions table between %q and %q", strings.TrimSpace(start), end)
	}
	want := actionsTable()
	got := readme[i+len(start) : j]
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(path, []byte(readme[:i+len(start)]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's actions table is out of date; run go test ./internal/actions -update-readme")
}

func actionsTable() string {
	var b strings.Builder
	b.WriteString("| action | category flag (default) | fields (`?` optional) | notes |\n|---|---|---|---|\n")
	for _, s := range Specs {
		def := "on"
		if !DefaultOn(s.Category) {
			def = "off"
		}
		var fs []string
		for _, f := range s.Fields {
			n := "`" + f.Name + "`"
			if !f.Required {
				n += "?"
			}
			fs = append(fs, n)
		}
		var notes []string
		if s.Query {
			notes = append(notes, "query")
		}
		if s.Destructive {
			notes = append(notes, "**a person confirms**")
		}
		if scheduledForbidden[s.Category] || s.Destructive {
			notes = append(notes, "not in scheduled runs")
		}
		notes = append(notes, strings.ReplaceAll(s.Doc, "|", "/"))
		fmt.Fprintf(&b, "| `%s` | `DISCORD_ACTIONS_%s` (%s) | %s | %s |\n", s.Type, strings.ToUpper(string(s.Category)), def,
			strings.Join(fs, ", "), strings.Join(notes, "; "))
	}
	return b.String()
}
