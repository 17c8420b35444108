// Command gateway runs the agent gateway: a Discord bot in front of a coding
// agent CLI. See README.md.
package main

import (
	"os"

	"github.com/agentgateway/gateway/internal/cli"
	// Cron jobs name IANA time zones; embed the database so they work on
	// machines and images without /usr/share/zoneinfo (gzipped: a quarter
	// of time/tzdata's size).
	_ "github.com/agentgateway/gateway/internal/tzdata"
)

func main() {
	os.Exit(cli.Main())
}
