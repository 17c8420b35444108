package actions

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/readmetest"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's table of actions from the catalog")

// The table of actions in docs/actions.md is made from the catalog, so that it lists
// every type, its flag, its default and what needs a person's
// confirmation, and cannot drift: go test ./internal/actions -update-readme
// rewrites it.
func TestREADMEListsEveryAction(t *testing.T) {
	readmetest.Section(t, "../../docs/actions.md",
		"<!-- actions table: made by go test ./internal/actions -update-readme -->\n", "<!-- end of actions table -->",
		actionsTable(), *updateREADME, "go test ./internal/actions -update-readme")
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
		if NotScheduled(&s) {
			notes = append(notes, "not in scheduled runs")
		}
		notes = append(notes, strings.ReplaceAll(s.Doc, "|", "/"))
		fmt.Fprintf(&b, "| `%s` | `DISCORD_ACTIONS_%s` (%s) | %s | %s |\n", s.Type, strings.ToUpper(string(s.Category)), def,
			strings.Join(fs, ", "), strings.Join(notes, "; "))
	}
	return b.String()
}
