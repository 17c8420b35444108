package schedule

import "fmt"

// Names of the files the parsers read; Problems carry them.
const (
	HeartbeatFile = "heartbeat.md"
	AgentsFile    = "agents.md"
)

// Problem is one thing wrong with a config file: the item it concerns is
// left out, everything else still parses.
type Problem struct {
	File    string
	Line    int // 1-based line in the original file
	Message string
}

// String formats p like a compiler diagnostic: "agents.md:12: message".
func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
}
