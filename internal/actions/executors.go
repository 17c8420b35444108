package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits of the actions' fields, as Discord sets them.
const (
	maxReadMessages = 50
	maxPollAnswers  = 10
	maxPollHours    = 768 // 32 days
	maxTimeout      = 28 * 24 * time.Hour
	minPromptEmoji  = 2
	maxPromptEmoji  = 9
)

// executors holds the types this gateway can run. A type of the catalog
// without one is not advertised and fails as "not available".
var executors = map[string]executor{
	"channelList":        channelList,
	"channelInfo":        channelInfo,
	"channelCreate":      channelCreate,
	"channelEdit":        channelEdit,
	"channelDelete":      channelDelete,
	"threadCreate":       threadCreate,
	"threadListArchived": threadListArchived,
	"sendMessage":        sendMessage,
	"sendFile":           sendFile,
	"react":              react,
	"unreact":            unreact,
	"readMessages":       readMessages,
	"fetchMessage":       fetchMessage,
	"editMessage":        editMessage,
	"deleteMessage":      deleteMessage,
	"pinMessage":         pinMessage,
	"unpinMessage":       unpinMessage,
	"listPins":           listPins,
	"memberInfo":         memberInfo,
	"roleList":           roleList,
	"roleAdd":            roleAdd,
	"roleRemove":         roleRemove,
	"eventCreate":        eventCreate,
	"eventList":          eventList,
	"timeout":            timeoutMember,
	"kick":               kick,
	"ban":                ban,
	"pollCreate":         pollCreate,
	"memoryRemember":     memoryRemember,
	"memoryForget":       memoryForget,
	"memoryShow":         memoryShow,
	"botSetNickname":     botSetNickname,
	"modelShow":          modelShow,
	"modelSet":           modelSet,
	"defer":              deferPrompt,
	"botSetStatus":       botSetStatus,
	"botSetActivity":     botSetActivity,
	"reactionPrompt":     reactionPrompt,
	"cronList":           cronList,
	"cronCreate":         cronCreate,
	"cronUpdate":         cronUpdate,
	"cronDelete":         cronDelete,
	"cronPause":          cronPause,
	"cronResume":         cronResume,
	"cronTrigger":        cronTrigger,
}

func channelList(ctx context.Context, x *run, _ Action) (string, string, error) {
	chs, err := x.env.Discord.Channels(ctx, x.ev.GuildID)
	if err != nil {
		return "", "", err
	}
	x.channels = chs
	var b strings.Builder
	names := map[string]string{}
	for _, c := range chs {
		names[c.ID] = c.Name
	}
	n := 0
	for _, c := range chs {
		if x.env.ChannelAllowed != nil && !x.env.ChannelAllowed(c.ID) && c.Type != 4 {
			continue
		}
		n++
		fmt.Fprintf(&b, "- #%s (%s, %s)", c.Name, c.ID, channelKind(c.Type))
		if p := names[c.ParentID]; p != "" {
			fmt.Fprintf(&b, " in %s", p)
		}
		if c.Topic != "" {
			fmt.Fprintf(&b, ": %s", excerpt(c.Topic, 120))
		}
		b.WriteByte('\n')
	}
	return fmt.Sprintf("listed %d channels", n), b.String(), nil
}

func channelKind(t int) string {
	switch t {
	case 0:
		return "text"
	case 2:
		return "voice"
	case 4:
		return "category"
	case 5:
		return "announcement"
	case 10, 11, 12:
		return "thread"
	case 13:
		return "stage"
	case 15:
		return "forum"
	}
	return fmt.Sprintf("type %d", t)
}

func channelInfo(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	data := fmt.Sprintf("#%s (%s): %s channel", c.Name, c.ID, channelKind(c.Type))
	for _, p := range x.channels {
		if p.ID == c.ParentID && c.ParentID != "" {
			data += ", in " + p.Name
		}
	}
	if c.Topic != "" {
		data += "; topic: " + c.Topic
	}
	return "read #" + c.Name, data + "\n", nil
}

func channelCreate(ctx context.Context, x *run, a Action) (string, string, error) {
	nc := NewChannel{Name: a.String("name"), Topic: a.String("topic")}
	if p := a.String("parent"); p != "" {
		if x.channels == nil {
			if _, err := x.channel(ctx, x.ev.ChannelID); err != nil && x.channels == nil {
				return "", "", err
			}
		}
		for _, c := range x.channels {
			if c.Type == 4 && (c.ID == p || strings.EqualFold(c.Name, p)) {
				nc.ParentID = c.ID
			}
		}
		if nc.ParentID == "" {
			return "", "", fmt.Errorf("no category %q in this server", clip(p, 60))
		}
	}
	c, err := x.env.Discord.CreateChannel(ctx, x.ev.GuildID, nc)
	if err != nil {
		return "", "", err
	}
	if x.channels != nil {
		// Without a listing yet, the next lookup lists the server, the
		// new channel with it: a list of the new one alone would hide
		// the others.
		x.channels = append(x.channels, c)
	}
	return fmt.Sprintf("created #%s", c.Name), "", nil
}

func channelEdit(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	var name, topic *string
	if a.Has("name") {
		v := a.String("name")
		name = &v
	}
	if a.Has("topic") {
		v := a.String("topic")
		topic = &v
	}
	if name == nil && topic == nil {
		return "", "", errors.New("nothing to change: give name or topic")
	}
	edited, err := x.env.Discord.EditChannel(ctx, c.ID, name, topic)
	if err != nil {
		return "", "", err
	}
	x.channels = nil
	return fmt.Sprintf("edited #%s", edited.Name), "", nil
}

func channelDelete(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	if c.ID == x.ev.ChannelID {
		return "", "", errors.New("the channel this conversation is in cannot be deleted from it")
	}
	if err := x.confirm(ctx, fmt.Sprintf("delete the channel #%s", c.Name)); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.DeleteChannel(ctx, c.ID); err != nil {
		return "", "", err
	}
	x.channels = nil
	return fmt.Sprintf("deleted #%s", c.Name), "", nil
}

func threadCreate(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	msg := ""
	if m := a.String("messageId"); m != "" {
		if msg, err = snowflake("messageId", m); err != nil {
			return "", "", err
		}
	}
	th, err := x.env.Discord.CreateThread(ctx, c.ID, msg, a.String("name"))
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("started the thread %q in #%s", th.Name, c.Name), "", nil
}

func threadListArchived(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	ths, err := x.env.Discord.ArchivedThreads(ctx, c.ID)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, t := range ths {
		fmt.Fprintf(&b, "- %s (%s)\n", t.Name, t.ID)
	}
	if len(ths) == 0 {
		b.WriteString("(no archived threads)\n")
	}
	return fmt.Sprintf("listed %d archived threads of #%s", len(ths), c.Name), b.String(), nil
}

func sendMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	content := strings.TrimSpace(a.String("content"))
	if content == "" {
		return "", "", errors.New("content is empty")
	}
	if _, err := x.env.Discord.Send(ctx, c.ID, content, nil); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("posted in #%s", c.Name), "", nil
}

func sendFile(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	if x.env.ResolveFile == nil {
		return "", "", errors.New("sending files is not available")
	}
	path, err := x.env.ResolveFile(x.ev.WorkDir, a.String("path"))
	if err != nil {
		return "", "", err
	}
	if _, err := x.env.Discord.Send(ctx, c.ID, a.String("content"), []string{path}); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("sent %s in #%s", baseName(a.String("path")), c.Name), "", nil
}

func baseName(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		return p[i+1:]
	}
	return p
}

// messageTarget resolves the channel and message id fields.
func messageTarget(ctx context.Context, x *run, a Action) (Channel, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return Channel{}, "", err
	}
	id, err := snowflake("messageId", a.String("messageId"))
	return c, id, err
}

func react(ctx context.Context, x *run, a Action) (string, string, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.React(ctx, c.ID, id, a.String("emoji")); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("reacted %s in #%s", a.String("emoji"), c.Name), "", nil
}

func unreact(ctx context.Context, x *run, a Action) (string, string, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Unreact(ctx, c.ID, id, a.String("emoji")); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("removed the reaction %s in #%s", a.String("emoji"), c.Name), "", nil
}

func readMessages(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	limit := int64(20)
	if n, ok := a.Int("limit"); ok {
		limit = n
	}
	if limit < 1 || limit > maxReadMessages {
		return "", "", fmt.Errorf("limit must be 1 to %d", maxReadMessages)
	}
	msgs, err := x.env.Discord.Messages(ctx, c.ID, int(limit))
	if err != nil {
		return "", "", err
	}
	data := messageLines(msgs)
	if data == "" {
		data = "(no messages)\n"
	}
	return fmt.Sprintf("read %d messages in #%s", len(msgs), c.Name), data, nil
}

func fetchMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	m, err := x.env.Discord.Message(ctx, c.ID, id)
	if err != nil {
		return "", "", err
	}
	data := fmt.Sprintf("%s %s (%s):\n%s\n", m.ID, m.Author, m.Time.UTC().Format(time.RFC3339), m.Content)
	return fmt.Sprintf("read a message in #%s", c.Name), data, nil
}

// ownMessage fetches a message and checks the bot wrote it.
func ownMessage(ctx context.Context, x *run, a Action) (Channel, Message, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return Channel{}, Message{}, err
	}
	m, err := x.env.Discord.Message(ctx, c.ID, id)
	if err != nil {
		return Channel{}, Message{}, err
	}
	if m.AuthorID != x.env.Discord.BotID() {
		return Channel{}, Message{}, errNotMine
	}
	return c, m, nil
}

func editMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, m, err := ownMessage(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.EditMessage(ctx, c.ID, m.ID, a.String("content")); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("edited a message in #%s", c.Name), "", nil
}

func deleteMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, m, err := ownMessage(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.confirm(ctx, fmt.Sprintf("delete the bot's message in #%s: %q", c.Name, excerpt(m.Content, 80))); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.DeleteMessage(ctx, c.ID, m.ID); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("deleted a message in #%s", c.Name), "", nil
}

func pinMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Pin(ctx, c.ID, id); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("pinned a message in #%s", c.Name), "", nil
}

func unpinMessage(ctx context.Context, x *run, a Action) (string, string, error) {
	c, id, err := messageTarget(ctx, x, a)
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Unpin(ctx, c.ID, id); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("unpinned a message in #%s", c.Name), "", nil
}

func listPins(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	msgs, err := x.env.Discord.Pins(ctx, c.ID)
	if err != nil {
		return "", "", err
	}
	data := messageLines(msgs)
	if data == "" {
		data = "(no pinned messages)\n"
	}
	return fmt.Sprintf("listed %d pinned messages in #%s", len(msgs), c.Name), data, nil
}

func memberInfo(ctx context.Context, x *run, a Action) (string, string, error) {
	id, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	m, err := x.env.Discord.Member(ctx, x.ev.GuildID, id)
	if err != nil {
		return "", "", err
	}
	roles, _ := x.env.Discord.Roles(ctx, x.ev.GuildID)
	names := map[string]string{}
	for _, r := range roles {
		names[r.ID] = r.Name
	}
	var rs []string
	for _, r := range m.RoleIDs {
		rs = append(rs, firstNonEmpty(names[r], r))
	}
	data := fmt.Sprintf("%s (%s)", m.Username, m.UserID)
	if m.Nick != "" {
		data += ", nickname " + m.Nick
	}
	if !m.Joined.IsZero() {
		data += ", joined " + m.Joined.UTC().Format("2006-01-02")
	}
	data += ", roles: " + firstNonEmpty(strings.Join(rs, ", "), "none") + "\n"
	return "read the member " + m.Username, data, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func roleList(ctx context.Context, x *run, _ Action) (string, string, error) {
	roles, err := x.env.Discord.Roles(ctx, x.ev.GuildID)
	if err != nil {
		return "", "", err
	}
	x.roles = roles
	var b strings.Builder
	for _, r := range roles {
		fmt.Fprintf(&b, "- %s (%s)\n", r.Name, r.ID)
	}
	return fmt.Sprintf("listed %d roles", len(roles)), b.String(), nil
}

func roleAdd(ctx context.Context, x *run, a Action) (string, string, error) {
	uid, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	r, err := x.role(ctx, a.String("role"))
	if err != nil {
		return "", "", err
	}
	if err := x.env.Discord.AddRole(ctx, x.ev.GuildID, uid, r.ID, "asked of the agent"); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("gave the role %s", r.Name), "", nil
}

func roleRemove(ctx context.Context, x *run, a Action) (string, string, error) {
	uid, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	r, err := x.role(ctx, a.String("role"))
	if err != nil {
		return "", "", err
	}
	if err := x.confirm(ctx, fmt.Sprintf("take the role %s from <@%s>", r.Name, uid)); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.RemoveRole(ctx, x.ev.GuildID, uid, r.ID, "asked of the agent, confirmed"); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("took the role %s", r.Name), "", nil
}

func eventCreate(ctx context.Context, x *run, a Action) (string, string, error) {
	start, err := time.Parse(time.RFC3339, a.String("startTime"))
	if err != nil {
		return "", "", errors.New("startTime must be a time like 2026-12-01T15:00:00Z")
	}
	end := start.Add(time.Hour)
	if s := a.String("endTime"); s != "" {
		if end, err = time.Parse(time.RFC3339, s); err != nil || !end.After(start) {
			return "", "", errors.New("endTime must be a time after startTime")
		}
	}
	ev := Event{Name: a.String("name"), Description: a.String("description"), Location: firstNonEmpty(a.String("location"), "Discord"), Start: start, End: end}
	created, err := x.env.Discord.CreateEvent(ctx, x.ev.GuildID, ev)
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("scheduled the event %q for %s", created.Name, start.UTC().Format("2006-01-02 15:04 MST")), "", nil
}

func eventList(ctx context.Context, x *run, _ Action) (string, string, error) {
	evs, err := x.env.Discord.Events(ctx, x.ev.GuildID)
	if err != nil {
		return "", "", err
	}
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "- %s (%s): %s", e.Name, e.ID, e.Start.UTC().Format(time.RFC3339))
		if e.Location != "" {
			fmt.Fprintf(&b, " at %s", e.Location)
		}
		b.WriteByte('\n')
	}
	if len(evs) == 0 {
		b.WriteString("(no scheduled events)\n")
	}
	return fmt.Sprintf("listed %d events", len(evs)), b.String(), nil
}

func timeoutMember(ctx context.Context, x *run, a Action) (string, string, error) {
	uid, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	minutes, _ := a.Int("minutes")
	d := time.Duration(minutes) * time.Minute
	if d <= 0 || d > maxTimeout {
		return "", "", errors.New("minutes must be 1 to 40320 (28 days)")
	}
	if err := x.confirm(ctx, fmt.Sprintf("time out <@%s> for %d minutes", uid, minutes)); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Timeout(ctx, x.ev.GuildID, uid, time.Now().Add(d), a.String("reason")); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("timed out a member for %d minutes", minutes), "", nil
}

func kick(ctx context.Context, x *run, a Action) (string, string, error) {
	uid, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	if err := x.confirm(ctx, fmt.Sprintf("kick <@%s>", uid)); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Kick(ctx, x.ev.GuildID, uid, a.String("reason")); err != nil {
		return "", "", err
	}
	return "kicked a member", "", nil
}

func ban(ctx context.Context, x *run, a Action) (string, string, error) {
	uid, err := snowflake("userId", a.String("userId"))
	if err != nil {
		return "", "", err
	}
	if err := x.confirm(ctx, fmt.Sprintf("ban <@%s>", uid)); err != nil {
		return "", "", err
	}
	if err := x.env.Discord.Ban(ctx, x.ev.GuildID, uid, a.String("reason")); err != nil {
		return "", "", err
	}
	return "banned a member", "", nil
}

func pollCreate(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	answers := a.Strings("answers")
	if len(answers) < 2 || len(answers) > maxPollAnswers {
		return "", "", fmt.Errorf("answers must have 2 to %d entries", maxPollAnswers)
	}
	hours := int64(24)
	if h, ok := a.Int("durationHours"); ok {
		hours = h
	}
	if hours < 1 || hours > maxPollHours {
		return "", "", fmt.Errorf("durationHours must be 1 to %d", maxPollHours)
	}
	p := Poll{Question: a.String("question"), Answers: answers, Duration: time.Duration(hours) * time.Hour, MultiSelect: a.Bool("multiSelect")}
	if _, err := x.env.Discord.CreatePoll(ctx, c.ID, p); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("started the poll %q in #%s", excerpt(p.Question, 80), c.Name), "", nil
}

func memoryRemember(_ context.Context, x *run, a Action) (string, string, error) {
	text := strings.Join(strings.Fields(a.String("text")), " ")
	if text == "" {
		return "", "", errors.New("text is empty")
	}
	if err := x.env.Memory.Remember(text); err != nil {
		return "", "", err
	}
	return "remembered: " + excerpt(text, 80), "", nil
}

func memoryForget(_ context.Context, x *run, a Action) (string, string, error) {
	text := strings.TrimSpace(a.String("text"))
	if len(text) < 3 {
		return "", "", errors.New("text must have at least 3 characters (it removes every line that contains it)")
	}
	n, err := x.env.Memory.Forget(text)
	if err != nil {
		return "", "", err
	}
	if n == 0 {
		return "", "", fmt.Errorf("no memory line contains %q", excerpt(text, 60))
	}
	return fmt.Sprintf("forgot %d memory lines", n), "", nil
}

func memoryShow(_ context.Context, x *run, _ Action) (string, string, error) {
	s, err := x.env.Memory.Show()
	if err != nil {
		return "", "", err
	}
	return "read the memory", s + "\n", nil
}

func botSetNickname(ctx context.Context, x *run, a Action) (string, string, error) {
	nick := strings.TrimSpace(a.String("nickname"))
	if len([]rune(nick)) > 32 {
		return "", "", errors.New("nickname must be at most 32 characters")
	}
	if err := x.env.Discord.SetNickname(ctx, x.ev.GuildID, nick); err != nil {
		return "", "", err
	}
	if nick == "" {
		return "cleared the nickname", "", nil
	}
	return "set the nickname to " + nick, "", nil
}

func modelShow(_ context.Context, x *run, _ Action) (string, string, error) {
	m, def := x.env.Models.Model(x.ev.ChannelID)
	data := "This channel uses the model " + firstNonEmpty(m, "the CLI's default")
	if def {
		data += " (the gateway's default)"
	}
	return "read the model", data + "\n", nil
}

func modelSet(_ context.Context, x *run, a Action) (string, string, error) {
	m := strings.TrimSpace(a.String("model"))
	if err := x.env.Models.SetModel(x.ev.ChannelID, m); err != nil {
		return "", "", err
	}
	if m == "" {
		return "this channel's model is the default again", "", nil
	}
	return "this channel's model is now " + m, "", nil
}

func deferPrompt(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	secs, _ := a.Int("delaySeconds")
	d := time.Duration(secs) * time.Second
	if d <= 0 || (x.env.MaxDefer > 0 && d > x.env.MaxDefer) {
		return "", "", fmt.Errorf("delaySeconds must be 1 to %d (DISCORD_ACTIONS_DEFER_MAX_SECONDS)", int(x.env.MaxDefer/time.Second))
	}
	prompt := strings.TrimSpace(a.String("prompt"))
	if prompt == "" {
		return "", "", errors.New("prompt is empty")
	}
	if err := x.env.Defer.Defer(x.ev, c.ID, prompt, d); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("will run a prompt in #%s in %s", c.Name, d), "", nil
}

func botSetStatus(ctx context.Context, x *run, a Action) (string, string, error) {
	if err := x.env.Presence.SetStatus(ctx, a.String("status")); err != nil {
		return "", "", err
	}
	return "set the status to " + strings.ToLower(a.String("status")), "", nil
}

func botSetActivity(ctx context.Context, x *run, a Action) (string, string, error) {
	if err := x.env.Presence.SetActivity(ctx, a.String("activity"), a.String("text")); err != nil {
		return "", "", err
	}
	if strings.TrimSpace(a.String("text")) == "" {
		return "cleared the activity", "", nil
	}
	return fmt.Sprintf("set the activity to %s %s", strings.ToLower(a.String("activity")), excerpt(a.String("text"), 60)), "", nil
}

func reactionPrompt(ctx context.Context, x *run, a Action) (string, string, error) {
	c, err := x.channel(ctx, a.String("channel"))
	if err != nil {
		return "", "", err
	}
	emoji := a.Strings("emoji")
	if len(emoji) < minPromptEmoji || len(emoji) > maxPromptEmoji {
		return "", "", fmt.Errorf("emoji must have %d to %d entries", minPromptEmoji, maxPromptEmoji)
	}
	question := strings.TrimSpace(a.String("question"))
	if question == "" {
		return "", "", errors.New("question is empty")
	}
	if _, err := x.env.Reactions.AskWithReactions(ctx, x.ev, c.ID, question, emoji); err != nil {
		return "", "", err
	}
	return fmt.Sprintf("asked %q in #%s", excerpt(question, 60), c.Name), "", nil
}
