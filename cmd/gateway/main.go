// Command gateway runs the agent gateway: a Discord bot in front of a coding
// agent CLI. See README.md.
package main

import (
	"os"

	"github.com/agentgateway/gateway/internal/cli"
)

func main() {
	os.Exit(cli.Main())
}
