package backends

import (
	"fmt"
	"strings"
)

// Capabilities says what a backend can do beyond running one turn and
// reporting its events (DESIGN decision 26). Every adapter declares its
// own with a Capabilities method, here in one place so that they read as
// a table; the README's backend table and `gateway doctor` are made from
// them (CapabilitiesOf).
//
// Warm processes, soft stop, approvals and steering need the adapter's
// long-running mode, which the gateway turns on (WarmOptions.Interactive)
// for `gateway run` and `gateway chat`; with AGENT_KEEP_ALIVE=0 a turn
// still uses it when it may ask for approvals.
type Capabilities struct {
	// Warm names the long-running mode in which a process is kept for its
	// conversation's next turn (AGENT_KEEP_ALIVE, in the shared pool under
	// MAX_WARM_PROCESSES and MAX_WARM_MEMORY_MB); "" when every turn
	// starts a process of its own.
	Warm string
	// SoftStop is set when Stop asks the CLI to end the turn (an interrupt
	// request) and the process and session stay; otherwise Stop kills the
	// process group.
	SoftStop bool
	// Approvals is set when the tool calls the CLI wants permission for
	// are asked about in Discord (Request.Approve).
	Approvals bool
	// Steering is set when a prompt can be written into the running turn
	// (STEER=steer; the backend has a Steer method).
	Steering bool
	// Images is set when attached images reach the model with the prompt
	// (Request.Images); otherwise the prompt names their paths for the
	// agent's own tools.
	Images bool
	// Cost is set when the CLI reports what a turn cost; otherwise /cost
	// counts tokens only.
	Cost bool
	// Resume is set when a stored session id resumes the conversation in
	// a new process.
	Resume bool
	// Note is what else a user should know about the backend, in Markdown
	// for the README's table; "" for nothing.
	Note string
}

// Capabilities implements capable.
func (c *Claude) Capabilities() Capabilities {
	return Capabilities{Warm: "stream-json", SoftStop: true, Approvals: true, Steering: true, Images: true, Cost: true, Resume: true,
		Note: "questions and plans are asked in Discord too"}
}

// Capabilities implements capable.
func (c *Codex) Capabilities() Capabilities {
	return Capabilities{Warm: "`codex app-server`", SoftStop: true, Approvals: true, Steering: true, Images: true, Resume: true,
		Note: "without warm processes each turn is `codex exec` with `approval_policy=never`: the sandbox tier follows `PERMISSION_MODE` and shows on the turn card"}
}

// Capabilities implements capable.
func (g *Gemini) Capabilities() Capabilities {
	return Capabilities{Warm: "ACP: `gemini --acp`", SoftStop: true, Approvals: true, Images: true, Resume: true,
		Note: "a warm conversation lasts as long as its process: gemini 0.61.0 cannot load a session its ACP mode made " +
			"(`session/load` finds none), so after `AGENT_KEEP_ALIVE` or a restart it goes on in a new session given the recent messages; " +
			"with `AGENT_KEEP_ALIVE=0` turns resume with `--resume`"}
}

// Capabilities implements capable.
func (o *Opencode) Capabilities() Capabilities {
	return Capabilities{Warm: "ACP: `opencode acp`", SoftStop: true, Approvals: true, Images: true, Cost: true, Resume: true,
		Note: "cost only with `AGENT_KEEP_ALIVE=0`: its ACP mode reports tokens, not cost"}
}

// Capabilities implements capable.
func (p *Pi) Capabilities() Capabilities {
	return Capabilities{Warm: "RPC: `pi --mode rpc`", SoftStop: true, Approvals: true, Steering: true, Images: true, Cost: true, Resume: true,
		Note: "approvals through an extension the gateway loads with `-e` (bash, edit and write ask in `default`, bash in `acceptEdits`; writes into `.pi/` always ask); " +
			"other extensions' dialogs are dismissed; stop, steering and images need warm processes (`AGENT_KEEP_ALIVE`)"}
}

// Capabilities implements capable.
func (a *ACP) Capabilities() Capabilities {
	return Capabilities{Warm: "ACP: `ACP_COMMAND`", SoftStop: true, Approvals: true, Images: true, Cost: true, Resume: true,
		Note: "images, cost and resuming as far as the agent supports them"}
}

// capable is a backend that declares its capabilities.
type capable interface {
	Capabilities() Capabilities
}

var (
	_ capable = (*Claude)(nil)
	_ capable = (*Codex)(nil)
	_ capable = (*Gemini)(nil)
	_ capable = (*Opencode)(nil)
	_ capable = (*Pi)(nil)
	_ capable = (*ACP)(nil)
)

// CapabilitiesOf returns what b declares, and false when it declares
// nothing (a test fake).
func CapabilitiesOf(b Backend) (Capabilities, bool) {
	c, ok := b.(capable)
	if !ok {
		return Capabilities{}, false
	}
	return c.Capabilities(), true
}

// Summary says in one line what c offers, for `gateway doctor`.
func (c Capabilities) Summary() string {
	var parts []string
	if c.Warm != "" {
		parts = append(parts, "warm processes ("+strings.ReplaceAll(c.Warm, "`", "")+")")
	} else {
		parts = append(parts, "a process per turn")
	}
	stop := "stop kills the process"
	if c.SoftStop {
		stop = "soft stop"
	}
	parts = append(parts, stop)
	for _, f := range []struct {
		on   bool
		what string
	}{
		{c.Approvals, "approvals in Discord"},
		{c.Steering, "steering"},
		{c.Images, "images"},
		{c.Cost, "cost"},
		{c.Resume, "resume"},
	} {
		if f.on {
			parts = append(parts, f.what)
		} else {
			parts = append(parts, "no "+f.what)
		}
	}
	return strings.Join(parts, ", ")
}

// CapabilityTable is the README's backend table: one row per backend in
// names (registry names, as Names lists them), made from what each
// declares.
func CapabilityTable(names []string) (string, error) {
	var b strings.Builder
	b.WriteString("A soft stop, approvals, steering and images come with a backend's warm mode, which `AGENT_KEEP_ALIVE=0` turns off " +
		"(claude, gemini and opencode still use it for a turn that may ask for approvals); without it every turn is a process of its own " +
		"that Stop kills with its group.\n\n")
	b.WriteString("| backend | warm process | stop | approvals in Discord | steering | images | cost | resume | notes |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, name := range names {
		be, err := New(name, Options{})
		if err != nil {
			return "", err
		}
		c, ok := CapabilitiesOf(be)
		if closer, isCloser := be.(interface{ Close() error }); isCloser {
			_ = closer.Close()
		}
		if !ok {
			return "", fmt.Errorf("backend %q declares no capabilities", name)
		}
		warm := "no (a process per turn)"
		if c.Warm != "" {
			warm = "yes (" + c.Warm + ")"
		}
		stop := "kill the group"
		if c.SoftStop {
			stop = "interrupt, then kill"
		}
		steering := yesNo(c.Steering)
		if c.Steering {
			steering = "yes (`STEER=steer`)"
		}
		images := "no (paths in the prompt)"
		if c.Images {
			images = "yes"
		}
		cost := "no (tokens)"
		if c.Cost {
			cost = "yes"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, warm, stop, yesNo(c.Approvals), steering, images, cost, yesNo(c.Resume),
			strings.ReplaceAll(c.Note, "|", `\|`))
	}
	return b.String(), nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
