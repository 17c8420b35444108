// Command gateway runs the agent gateway: a Discord bot in front of a coding
// agent CLI. See README.md.
package main

import (
	"os"
	// Cron jobs name IANA time zones; embed the database so they work on
	// machines and images without /usr/share/zoneinfo.
	_ "time/tzdata"

	"github.com/agentgateway/gateway/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
