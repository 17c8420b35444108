package actions

import (
	"errors"
	"fmt"
	"strings"
)

// Flags are the DISCORD_ACTIONS settings: the master switch and each
// category's.
type Flags struct {
	Enabled    bool
	Categories map[Category]bool
}

// DefaultFlags are the flags with nothing set: on, moderation off.
func DefaultFlags() Flags {
	f := Flags{Enabled: true, Categories: map[Category]bool{}}
	for _, c := range Categories {
		f.Categories[c] = DefaultOn(c)
	}
	return f
}

// Context is where an event's actions would run.
type Context struct {
	// GuildID is the server the event came from; empty in a DM.
	GuildID string
	// Scheduled is set for heartbeats, cron jobs, hooks and webhooks, and
	// for whatever inherits their restrictions (the answer to a question
	// one of them asked).
	Scheduled bool
	// Implemented, if set, says which types this gateway can run; nil
	// means all.
	Implemented func(typ string) bool
}

// Refusals.
var (
	ErrNoGuild   = errors.New("actions work only in a server, not in direct messages")
	ErrDisabled  = errors.New("disabled")
	ErrScheduled = errors.New("not allowed in a scheduled or webhook-triggered run")
)

// Check says why s may not run in c (nil when it may).
func (f Flags) Check(c Context, s *Spec) error {
	switch {
	case !f.Enabled:
		return fmt.Errorf("%s: actions are %w (DISCORD_ACTIONS)", s.Type, ErrDisabled)
	case c.GuildID == "":
		return fmt.Errorf("%s: %w", s.Type, ErrNoGuild)
	case !f.Categories[s.Category]:
		return fmt.Errorf("%s: %s actions are %w (DISCORD_ACTIONS_%s)", s.Type, s.Category, ErrDisabled, strings.ToUpper(string(s.Category)))
	case c.Scheduled && NotScheduled(s):
		return fmt.Errorf("%s: %w", s.Type, ErrScheduled)
	case c.Implemented != nil && !c.Implemented(s.Type):
		return fmt.Errorf("%s: not available in this gateway", s.Type)
	}
	return nil
}

// Available lists the types that may run in c, in catalog order.
func (f Flags) Available(c Context) []*Spec {
	var out []*Spec
	for i := range Specs {
		if f.Check(c, &Specs[i]) == nil {
			out = append(out, &Specs[i])
		}
	}
	return out
}

// PromptSection teaches the agent the actions it may use: the block
// syntax, the rules, and one example per available type. Empty when none
// is available (a DM, everything off): the agent is not told of actions it
// cannot use.
func PromptSection(specs []*Spec, maxPerTurn int) string {
	if len(specs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("You can act on Discord by putting action blocks in your reply, each one JSON object on its own line:\n\n")
	b.WriteString(OpenTag + `{"type":"channelList"}` + CloseTag + "\n\n")
	fmt.Fprintf(&b, "The gateway removes the blocks from your reply, runs them in order (at most %d per reply) and adds a Done: or Failed: line for each. ", maxPerTurn)
	b.WriteString("Use the field names exactly as in the examples; ids are strings. A channel is a name or an id; a role is a name or an id. ")
	b.WriteString("Blocks inside code blocks or `inline code` are shown, not run. ")
	b.WriteString("Actions marked (query) return data: you get the results in a new message and can continue from them. ")
	b.WriteString("Actions that delete or remove ask a person to confirm before they run.\n\n")
	var cat Category
	for _, s := range specs {
		if s.Category != cat {
			cat = s.Category
			fmt.Fprintf(&b, "%s:\n", categoryTitle(cat))
		}
		q := ""
		if s.Query {
			q = " (query)"
		}
		fmt.Fprintf(&b, "- %s%s: %s\n  %s%s%s\n", s.Type, q, s.Doc, OpenTag, s.Example, CloseTag)
	}
	return strings.TrimRight(b.String(), "\n")
}

func categoryTitle(c Category) string {
	switch c {
	case BotProfile:
		return "Bot profile"
	}
	s := string(c)
	return strings.ToUpper(s[:1]) + s[1:]
}
