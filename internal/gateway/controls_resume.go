package gateway

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/session"
)

// Carrying a session between a terminal and Discord: /resume binds a
// channel to a session started in a terminal, /status shows the command
// that continues the channel's session in one, and the autocompletion of
// /project, /model and /resume.

const (
	commandResume = "resume"
	resumeButton  = "resume:"
	// maxSuggestions is the most choices Discord shows.
	maxSuggestions = 25
	// shownPrompt bounds the first prompt quoted in /resume's question.
	shownPrompt = 300
)

// sessionFinder is the optional ability of a backend whose sessions the
// gateway can look up on disk (claude: backends.Claude).
type sessionFinder interface {
	Sessions(dir string, limit int) ([]backends.SessionInfo, error)
	FindSession(id string) (backends.SessionInfo, error)
}

// resumeChange is a /resume waiting for its Confirm.
type resumeChange struct {
	channel, user string
	// key is the session binding the answer sets: the channel's, or with
	// SESSION_SCOPE=user the asker's own in it.
	key     string
	session backends.SessionInfo
	expires time.Time
}

// finder is the backend's session finder, nil when it has none.
func (c *controls) finder() sessionFinder {
	f, _ := c.cli.(sessionFinder)
	return f
}

// channelDir is the directory the channel's CLI runs in now.
func (c *controls) channelDir(channel string) string {
	if p := c.sessions.Settings(channel).Project; p != "" {
		return p
	}
	return c.cfg.AgentWorkDir()
}

// boundElsewhere reports whether a binding other than key (another
// channel, or another person's in SESSION_SCOPE=user) continues session id.
func (c *controls) boundElsewhere(key, id string) (session.Binding, bool) {
	for _, ch := range c.sessions.Channels() {
		if ch == key {
			continue
		}
		if b, ok := c.sessions.Get(ch); ok && b.SessionID == id {
			return b, true
		}
	}
	return session.Binding{}, false
}

// busy is the refusal when a turn runs in the channel: its end would bind
// its own session over the one chosen.
func (c *controls) busy(channel string) bool {
	if c.queue == nil {
		return false
	}
	_, running, _ := c.queue.Lane(channel)
	return running
}

func (c *controls) resume(_ context.Context, cmd discord.Command) discord.CommandAnswer {
	refuse := func(text string) discord.CommandAnswer { return discord.CommandAnswer{Ephemeral: true, Text: text} }
	id := strings.TrimSpace(cmd.String("session"))
	if !backends.ValidSessionID(c.backend, id) {
		return refuse("Not changed: that is not a session id of " + c.backend + " (" + idForm(c.backend) + "). Pick one from the list while typing, or copy it from the CLI.")
	}
	key := c.sessionKey(cmd.ChannelID, cmd.GuildID, cmd.UserID)
	if b, ok := c.sessions.Get(key); ok && b.SessionID == id {
		return refuse("This channel already continues that session.")
	}
	if b, ok := c.boundElsewhere(key, id); ok {
		if b.Backend != "" && b.Backend != c.backend {
			return refuse("Not changed: that session was made by " + b.Backend + ", and the gateway now runs " + c.backend + ".")
		}
		return refuse("Not changed: another channel continues that session. Continue it there, or `/claude-reset` it there first.")
	}
	if c.busy(cmd.ChannelID) {
		return refuse("Not changed: a prompt is running in this channel. Wait for it to finish (or stop it), then `/resume` again.")
	}
	f := c.finder()
	if f == nil {
		// The gateway cannot look into this CLI's sessions: bound as
		// given; a session the CLI does not know heals itself on the next
		// prompt (a fresh one starts, and the user is told).
		if err := c.sessions.Set(key, session.Binding{SessionID: id, Backend: c.backend, WorkDir: c.channelDir(cmd.ChannelID), Updated: c.clock.Now()}); err != nil {
			c.log.Error().Err(err).Str("channel", cmd.ChannelID).Msg("save the resumed session")
			return refuse("Could not save the change: the session file could not be written. Check the gateway's log.")
		}
		c.log.Info().Str("channel", cmd.ChannelID).Str("session", id).Msg("channel bound to a session from a terminal (not checked)")
		return discord.CommandAnswer{Text: "This channel now continues the " + c.backend + " session `" + id + "`. The gateway could not check it (it looks into claude's sessions only); if " + c.backend + " does not know it, the next prompt starts a fresh conversation and says so."}
	}
	s, err := f.FindSession(id)
	switch {
	case errors.Is(err, backends.ErrNoSession):
		return refuse("Not found: the agent's " + c.backend + " has no session with that id on the gateway's machine. Sessions made by another user, or on another machine, cannot be continued here.")
	case err != nil:
		c.log.Error().Err(err).Str("channel", cmd.ChannelID).Msg("look up a session for /resume")
		return refuse("Could not look through the agent's sessions. Check the gateway's log.")
	}
	token := randomToken()
	c.mu.Lock()
	now := c.clock.Now()
	for k, p := range c.resumes {
		if now.After(p.expires) {
			delete(c.resumes, k)
		}
	}
	c.resumes[token] = resumeChange{channel: cmd.ChannelID, user: cmd.UserID, key: key, session: s, expires: now.Add(pendingTTL)}
	c.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "Continue the %s session made in %s (last used %s ago) in this channel?", c.backend, c.shellDir(s.Dir), card.Duration(now.Sub(s.Modified)))
	if p := s.FirstPrompt; p != "" {
		b.WriteString(" It began with:\n" + quote(p, shownPrompt))
	}
	if _, ok := c.sessions.Get(key); ok {
		b.WriteString("\nThis channel's current conversation is left behind.")
	}
	return discord.CommandAnswer{
		Ephemeral: true,
		Text:      b.String(),
		Buttons: []discord.Button{
			{ID: resumeButton + "yes:" + token, Label: "Continue it here", Style: discord.ButtonPrimary},
			{ID: resumeButton + "no:" + token, Label: "Cancel", Style: discord.ButtonSecondary},
		},
	}
}

func (c *controls) resumePress(_ context.Context, p discord.Press) discord.PressAnswer {
	choice, token, _ := strings.Cut(strings.TrimPrefix(p.ButtonID, resumeButton), ":")
	c.mu.Lock()
	change, ok := c.resumes[token]
	if ok && change.user != p.UserID {
		c.mu.Unlock()
		return discord.PressAnswer{Notice: "Only the person who ran `/resume` can answer it."}
	}
	delete(c.resumes, token)
	c.mu.Unlock()
	done := func(text string) discord.PressAnswer { return discord.PressAnswer{Update: &text} }
	switch {
	case !ok || c.clock.Now().After(change.expires) || change.channel != p.ChannelID:
		return done("This question has expired or was answered already; nothing changed. Run `/resume` again.")
	case choice != "yes":
		return done("Not changed.")
	case c.busy(change.channel):
		return done("Not changed: a prompt is running in this channel. Wait for it to finish (or stop it), then `/resume` again.")
	}
	if _, ok := c.boundElsewhere(change.key, change.session.ID); ok {
		return done("Not changed: another channel continues that session now.")
	}
	// WorkDir is where the session was made: the runtime carries it into
	// the channel's own directory before the next turn (SessionMover), as
	// it does after /project.
	b := session.Binding{SessionID: change.session.ID, Backend: c.backend, WorkDir: change.session.Dir, Updated: c.clock.Now()}
	if err := c.sessions.Set(change.key, b); err != nil {
		c.log.Error().Err(err).Str("channel", change.channel).Msg("save the resumed session")
		return done("Could not save the change: the session file could not be written. Check the gateway's log.")
	}
	c.log.Info().Str("channel", change.channel).Str("session", change.session.ID).Msg("channel bound to a session from a terminal")
	return done("This channel now continues that session; the next prompt picks it up where it was left.")
}

// idForm says what the backend's session ids look like.
func idForm(backend string) string {
	switch backend {
	case "claude", "codex", "gemini", "pi":
		return "a UUID like 123e4567-e89b-42d3-a456-426614174000"
	case "opencode":
		return "ses_ followed by letters and digits"
	}
	return "letters, digits and . _ : -"
}

// quote is text as a Discord quote of at most max characters, mentions
// and markdown links left as text (nothing pings anyway).
func quote(text string, max int) string {
	if r := []rune(text); len(r) > max {
		text = string(r[:max-1]) + "…"
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = "> " + l
	}
	return strings.Join(lines, "\n")
}

// safeWord matches what a shell takes without quotes.
var safeWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._/@:+=-]+$`) })

// shq quotes s for a POSIX shell when it needs it.
func shq(s string) string {
	if safeWord().MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellDir names dir as a person at the gateway's machine can type it,
// without the server's paths (they never reach Discord): $PROJECTS_ROOT,
// $WORK_DIR or $CONFIG_DIR and the path below it. "" when dir is none of
// these.
func (c *controls) shellDir(dir string) string {
	if dir == "" {
		return ""
	}
	dir = filepath.Clean(dir)
	for _, base := range []struct{ name, path string }{
		{"PROJECTS_ROOT", c.cfg.ProjectsRoot}, {"WORK_DIR", c.cfg.WorkDir}, {"CONFIG_DIR", c.cfg.ConfigDir},
	} {
		if base.path == "" {
			continue
		}
		for _, root := range rootForms(base.path) {
			rel, err := filepath.Rel(root, dir)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				continue
			}
			if rel == "." {
				return `"$` + base.name + `"`
			}
			return `"$` + base.name + `"/` + shq(rel)
		}
	}
	return ""
}

// rootForms are path as configured and with its links resolved.
func rootForms(path string) []string {
	out := []string{filepath.Clean(path)}
	if real, err := filepath.EvalSymlinks(path); err == nil && real != out[0] {
		out = append(out, real)
	}
	return out
}

// terminalCommand is the command that continues b in a terminal on the
// gateway's machine, as the agent's user (AGENT_USER: its CLI keeps the
// sessions in that user's home); "" when the backend has none.
func (c *controls) terminalCommand(b session.Binding, channel string) string {
	backend := b.Backend
	if backend == "" {
		backend = c.backend
	}
	args := backends.ResumeArgs(backend, b.SessionID)
	if args == nil {
		return ""
	}
	for i, a := range args {
		args[i] = shq(a)
	}
	run := strings.Join(args, " ")
	if c.cfg.AgentUser != "" {
		// sudo keeps the working directory; -H gives the CLI the agent's
		// home, where its sessions are.
		run = "sudo -u " + shq(c.cfg.AgentUser) + " -H " + run
	}
	dir := c.shellDir(firstNonEmpty(b.WorkDir, c.channelDir(channel)))
	if dir == "" {
		return run
	}
	return "cd " + dir + " && " + run
}

// codeSpan is s as inline code; a path with a backtick in it needs the
// double-backtick form.
func codeSpan(s string) string {
	if strings.Contains(s, "`") {
		return "`` " + s + " ``"
	}
	return "`" + s + "`"
}

// firstNonEmpty is the first of ss that is not empty.
func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// completeResume offers the newest sessions of the channel's directory
// that no other channel continues, labelled with their first prompt.
func (c *controls) completeResume(_ context.Context, r discord.AutocompleteRequest) []discord.Choice {
	f := c.finder()
	if f == nil || r.Focused != "session" {
		return nil
	}
	list, err := f.Sessions(c.channelDir(r.ChannelID), maxSuggestions*2)
	if err != nil {
		c.log.Warn().Err(err).Str("channel", r.ChannelID).Msg("list sessions for /resume")
		return nil
	}
	typed := strings.ToLower(strings.TrimSpace(r.Value))
	key := c.sessionKey(r.ChannelID, r.GuildID, r.UserID)
	cur, _ := c.sessions.Get(key)
	now := c.clock.Now()
	var out []discord.Choice
	for _, s := range list {
		if len(out) == maxSuggestions {
			break
		}
		if s.ID == cur.SessionID {
			continue
		}
		if _, other := c.boundElsewhere(key, s.ID); other {
			continue
		}
		if typed != "" && !strings.Contains(strings.ToLower(s.ID), typed) && !strings.Contains(strings.ToLower(s.FirstPrompt), typed) {
			continue
		}
		out = append(out, discord.Choice{Name: sessionLabel(s, now), Value: s.ID})
	}
	return out
}

// sessionLabel is a session as the list shows it: its first prompt on one
// line and its age, within Discord's 100 characters.
func sessionLabel(s backends.SessionInfo, now time.Time) string {
	age := " · " + ago(now.Sub(s.Modified))
	p := strings.Join(strings.Fields(s.FirstPrompt), " ")
	if p == "" {
		p = "(no prompt) " + s.ID[:min(8, len(s.ID))]
	}
	room := 100 - len([]rune(age))
	if r := []rune(p); len(r) > room {
		p = string(r[:room-1]) + "…"
	}
	return p + age
}

// ago is a short age for a list: "just now", "5m ago", "3h ago", "2d ago".
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// completeProject offers the folders under PROJECTS_ROOT that match what
// is typed: below the folder typed so far (up to its last /), by name,
// hidden ones (.worktrees, .git) left out.
func (c *controls) completeProject(_ context.Context, r discord.AutocompleteRequest) []discord.Choice {
	if c.cfg.ProjectsRoot == "" || r.Focused != "path" {
		return nil
	}
	typed := strings.TrimLeft(strings.TrimSpace(r.Value), "/")
	parent, prefix := "", typed
	if i := strings.LastIndex(typed, "/"); i >= 0 {
		parent, prefix = typed[:i], typed[i+1:]
	}
	dir := c.cfg.ProjectsRoot
	if parent != "" {
		var err error
		if dir, err = project.Resolve(c.cfg.ProjectsRoot, parent); err != nil {
			return nil
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []discord.Choice
	if parent == "" && prefix != "" && strings.HasPrefix("reset", strings.ToLower(prefix)) && c.sessions.Settings(r.ChannelID).Project != "" {
		out = append(out, discord.Choice{Name: "reset (back to the default directory)", Value: "reset"})
	}
	lower := strings.ToLower(prefix)
	for _, e := range entries {
		if len(out) == maxSuggestions {
			break
		}
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.Contains(strings.ToLower(name), lower) {
			continue
		}
		rel := name
		if parent != "" {
			rel = parent + "/" + name
		}
		// A link counts when it leads to a folder inside the root.
		if !e.IsDir() {
			if _, err := project.Resolve(c.cfg.ProjectsRoot, rel); err != nil {
				continue
			}
		}
		out = append(out, discord.Choice{Name: rel, Value: rel})
	}
	return out
}

// completeModel offers the backend's known models matching what is typed,
// the channel's and the default first.
func (c *controls) completeModel(_ context.Context, r discord.AutocompleteRequest) []discord.Choice {
	if r.Focused != "name" {
		return nil
	}
	typed := strings.ToLower(strings.TrimSpace(r.Value))
	var out []discord.Choice
	seen := map[string]bool{}
	add := func(name, label string) {
		if name == "" || seen[name] || !validModel(name) || len(out) == maxSuggestions {
			return
		}
		if typed != "" && !strings.Contains(strings.ToLower(name), typed) {
			return
		}
		seen[name] = true
		out = append(out, discord.Choice{Name: name + label, Value: name})
	}
	add(c.sessions.Settings(r.ChannelID).Model, " (this channel's)")
	add(c.cfg.Model, " (the default)")
	for _, m := range backends.KnownModels(c.backend) {
		add(m, "")
	}
	return slices.Clip(out)
}
