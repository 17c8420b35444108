package actions

// Category groups action types under one enabling flag
// (DISCORD_ACTIONS_<CATEGORY>).
type Category string

// The categories, in the order the prompt lists them.
const (
	Channels   Category = "channels"
	Messaging  Category = "messaging"
	Guild      Category = "guild"
	Moderation Category = "moderation"
	Polls      Category = "polls"
	Crons      Category = "crons"
	Memory     Category = "memory"
	Defer      Category = "defer"
	BotProfile Category = "bot_profile"
	Config     Category = "config"
)

// Categories lists every category.
var Categories = []Category{Channels, Messaging, Guild, Moderation, Polls, Crons, Memory, Defer, BotProfile, Config}

// DefaultOn reports whether a category is enabled when its flag is not
// set: every one but moderation, as in the seed.
func DefaultOn(c Category) bool { return c != Moderation }

// scheduledForbidden are the categories no heartbeat, cron job, hook or
// webhook may use (the seed's cron restrictions): a scheduled run must not
// change the schedule, the bot, the memory, the configuration or set more
// runs in motion.
var scheduledForbidden = map[Category]bool{Crons: true, BotProfile: true, Memory: true, Config: true, Defer: true}

// Kind is the JSON type a field takes.
type Kind int

const (
	String Kind = iota + 1
	Int
	Bool
	Strings
)

// Field is one field of an action.
type Field struct {
	Name     string
	Kind     Kind
	Required bool
}

// Spec describes one action type.
type Spec struct {
	Type     string
	Category Category
	// Doc says what it does, for the prompt.
	Doc    string
	Fields []Field
	// Example is a block the prompt shows, using exactly these fields.
	Example string
	// Query actions only read: their results go back to the agent in a
	// follow-up turn.
	Query bool
	// Destructive actions need a person to confirm them, and never run
	// for a scheduled event.
	Destructive bool
	// PersonOnly actions run when a person asked, never for a scheduled
	// event (nor for the answer to its question): they give away access,
	// and a scheduled or webhook run's prompt may carry a stranger's words
	// (a payload) that no one is there to check.
	PersonOnly bool
}

// NotScheduled reports whether s never runs for a scheduled event: its
// category is one no schedule may use, it is destructive (nobody is there
// to confirm it) or it is for a person's runs only.
func NotScheduled(s *Spec) bool {
	return scheduledForbidden[s.Category] || s.Destructive || s.PersonOnly
}

func req(name string, k Kind) Field { return Field{Name: name, Kind: k, Required: true} }
func opt(name string, k Kind) Field { return Field{Name: name, Kind: k} }

// Specs lists every action type, by category.
var Specs = []Spec{
	{Type: "channelList", Category: Channels, Query: true, Doc: "list the server's channels",
		Example: `{"type":"channelList"}`},
	{Type: "channelInfo", Category: Channels, Query: true, Doc: "show a channel's name, topic, category and type",
		Fields: []Field{req("channel", String)}, Example: `{"type":"channelInfo","channel":"general"}`},
	{Type: "channelCreate", Category: Channels, Doc: "create a text channel, optionally under a category",
		Fields:  []Field{req("name", String), opt("topic", String), opt("parent", String)},
		Example: `{"type":"channelCreate","name":"standup","topic":"Daily standup notes"}`},
	{Type: "channelEdit", Category: Channels, Doc: "rename a channel or change its topic",
		Fields:  []Field{req("channel", String), opt("name", String), opt("topic", String)},
		Example: `{"type":"channelEdit","channel":"standup","topic":"Standup at 9:30"}`},
	{Type: "channelDelete", Category: Channels, Destructive: true, Doc: "delete a channel (asks a person to confirm)",
		Fields: []Field{req("channel", String)}, Example: `{"type":"channelDelete","channel":"old-notes"}`},
	{Type: "threadCreate", Category: Channels, Doc: "start a thread in a channel",
		Fields:  []Field{req("channel", String), req("name", String), opt("messageId", String)},
		Example: `{"type":"threadCreate","channel":"general","name":"Release 1.2"}`},
	{Type: "threadListArchived", Category: Channels, Query: true, Doc: "list a channel's archived threads",
		Fields: []Field{req("channel", String)}, Example: `{"type":"threadListArchived","channel":"general"}`},

	{Type: "sendMessage", Category: Messaging, Doc: "post a message in another channel",
		Fields:  []Field{req("channel", String), req("content", String)},
		Example: `{"type":"sendMessage","channel":"announcements","content":"The build is green again."}`},
	{Type: "sendFile", Category: Messaging, Doc: "post a file from your working directory",
		Fields:  []Field{req("channel", String), req("path", String), opt("content", String)},
		Example: `{"type":"sendFile","channel":"reports","path":"out/report.pdf","content":"This week's report"}`},
	{Type: "react", Category: Messaging, Doc: "add a reaction to a message",
		Fields:  []Field{req("channel", String), req("messageId", String), req("emoji", String)},
		Example: `{"type":"react","channel":"general","messageId":"123456789012345678","emoji":"👍"}`},
	{Type: "unreact", Category: Messaging, Doc: "remove your reaction from a message",
		Fields:  []Field{req("channel", String), req("messageId", String), req("emoji", String)},
		Example: `{"type":"unreact","channel":"general","messageId":"123456789012345678","emoji":"👍"}`},
	{Type: "readMessages", Category: Messaging, Query: true, Doc: "read a channel's last messages (at most 50)",
		Fields:  []Field{req("channel", String), opt("limit", Int)},
		Example: `{"type":"readMessages","channel":"general","limit":20}`},
	{Type: "fetchMessage", Category: Messaging, Query: true, Doc: "read one message",
		Fields:  []Field{req("channel", String), req("messageId", String)},
		Example: `{"type":"fetchMessage","channel":"general","messageId":"123456789012345678"}`},
	{Type: "editMessage", Category: Messaging, Doc: "edit one of your own messages",
		Fields:  []Field{req("channel", String), req("messageId", String), req("content", String)},
		Example: `{"type":"editMessage","channel":"general","messageId":"123456789012345678","content":"Corrected: the meeting is at 10."}`},
	{Type: "deleteMessage", Category: Messaging, Destructive: true, Doc: "delete one of your own messages (asks a person to confirm)",
		Fields:  []Field{req("channel", String), req("messageId", String)},
		Example: `{"type":"deleteMessage","channel":"general","messageId":"123456789012345678"}`},
	{Type: "pinMessage", Category: Messaging, Doc: "pin a message",
		Fields:  []Field{req("channel", String), req("messageId", String)},
		Example: `{"type":"pinMessage","channel":"general","messageId":"123456789012345678"}`},
	{Type: "unpinMessage", Category: Messaging, Doc: "unpin a message",
		Fields:  []Field{req("channel", String), req("messageId", String)},
		Example: `{"type":"unpinMessage","channel":"general","messageId":"123456789012345678"}`},
	{Type: "listPins", Category: Messaging, Query: true, Doc: "list a channel's pinned messages",
		Fields: []Field{req("channel", String)}, Example: `{"type":"listPins","channel":"general"}`},
	{Type: "reactionPrompt", Category: Messaging, Doc: "ask a question answered with a reaction (2-9 emoji); the answer comes back to you as a new message (from a scheduled run, only an approver can answer, and the answer's turn has the same limits)",
		Fields:  []Field{req("question", String), req("emoji", Strings), opt("channel", String)},
		Example: `{"type":"reactionPrompt","question":"Deploy now?","emoji":["✅","❌"]}`},

	{Type: "memberInfo", Category: Guild, Query: true, Doc: "show a member's name, roles and join date",
		Fields: []Field{req("userId", String)}, Example: `{"type":"memberInfo","userId":"123456789012345678"}`},
	{Type: "roleList", Category: Guild, Query: true, Doc: "list the server's roles",
		Example: `{"type":"roleList"}`},
	{Type: "roleAdd", Category: Guild, PersonOnly: true, Doc: "give a member a role",
		Fields:  []Field{req("userId", String), req("role", String)},
		Example: `{"type":"roleAdd","userId":"123456789012345678","role":"on-call"}`},
	{Type: "roleRemove", Category: Guild, Destructive: true, Doc: "take a role from a member (asks a person to confirm)",
		Fields:  []Field{req("userId", String), req("role", String)},
		Example: `{"type":"roleRemove","userId":"123456789012345678","role":"on-call"}`},
	{Type: "eventCreate", Category: Guild, Doc: "schedule a server event (start time in RFC 3339)",
		Fields:  []Field{req("name", String), req("startTime", String), opt("endTime", String), opt("description", String), opt("location", String)},
		Example: `{"type":"eventCreate","name":"Retro","startTime":"2026-12-01T15:00:00Z","endTime":"2026-12-01T16:00:00Z","location":"Meeting room"}`},
	{Type: "eventList", Category: Guild, Query: true, Doc: "list the server's scheduled events",
		Example: `{"type":"eventList"}`},

	{Type: "timeout", Category: Moderation, Destructive: true, Doc: "time a member out (asks a person to confirm)",
		Fields:  []Field{req("userId", String), req("minutes", Int), opt("reason", String)},
		Example: `{"type":"timeout","userId":"123456789012345678","minutes":10,"reason":"spam"}`},
	{Type: "kick", Category: Moderation, Destructive: true, Doc: "kick a member (asks a person to confirm)",
		Fields:  []Field{req("userId", String), opt("reason", String)},
		Example: `{"type":"kick","userId":"123456789012345678","reason":"spam"}`},
	{Type: "ban", Category: Moderation, Destructive: true, Doc: "ban a member (asks a person to confirm)",
		Fields:  []Field{req("userId", String), opt("reason", String)},
		Example: `{"type":"ban","userId":"123456789012345678","reason":"spam"}`},

	{Type: "pollCreate", Category: Polls, Doc: "start a poll (2-10 answers, duration in hours, 1-768)",
		Fields:  []Field{req("question", String), req("answers", Strings), opt("durationHours", Int), opt("multiSelect", Bool), opt("channel", String)},
		Example: `{"type":"pollCreate","question":"Lunch?","answers":["Pizza","Sushi"],"durationHours":4,"multiSelect":false}`},

	{Type: "cronList", Category: Crons, Query: true, Doc: "list the cron jobs",
		Example: `{"type":"cronList"}`},
	{Type: "cronCreate", Category: Crons, Doc: "add a cron job (5-field cron expression, local time)",
		Fields:  []Field{req("name", String), req("schedule", String), req("prompt", String), opt("channel", String), opt("model", String)},
		Example: `{"type":"cronCreate","name":"weekly-report","schedule":"0 9 * * 1","prompt":"Summarise last week's commits.","channel":"reports"}`},
	{Type: "cronUpdate", Category: Crons, Doc: "change a cron job's schedule, prompt, channel or model",
		Fields:  []Field{req("id", String), opt("schedule", String), opt("prompt", String), opt("channel", String), opt("model", String)},
		Example: `{"type":"cronUpdate","id":"weekly-report","schedule":"0 8 * * 1"}`},
	{Type: "cronDelete", Category: Crons, Doc: "remove a cron job",
		Fields: []Field{req("id", String)}, Example: `{"type":"cronDelete","id":"weekly-report"}`},
	{Type: "cronPause", Category: Crons, Doc: "pause a cron job",
		Fields: []Field{req("id", String)}, Example: `{"type":"cronPause","id":"weekly-report"}`},
	{Type: "cronResume", Category: Crons, Doc: "resume a paused cron job",
		Fields: []Field{req("id", String)}, Example: `{"type":"cronResume","id":"weekly-report"}`},
	{Type: "cronTrigger", Category: Crons, Doc: "run a cron job now",
		Fields: []Field{req("id", String)}, Example: `{"type":"cronTrigger","id":"weekly-report"}`},

	{Type: "memoryRemember", Category: Memory, Doc: "add a fact to your long-term memory",
		Fields: []Field{req("text", String)}, Example: `{"type":"memoryRemember","text":"The staging database is db-2."}`},
	{Type: "memoryForget", Category: Memory, Doc: "remove the memory lines that contain the text",
		Fields: []Field{req("text", String)}, Example: `{"type":"memoryForget","text":"db-1"}`},
	{Type: "memoryShow", Category: Memory, Query: true, Doc: "show your long-term memory",
		Example: `{"type":"memoryShow"}`},

	{Type: "defer", Category: Defer, Doc: "run a prompt in a channel later (delay in seconds)",
		Fields:  []Field{req("channel", String), req("prompt", String), req("delaySeconds", Int)},
		Example: `{"type":"defer","channel":"general","prompt":"Check whether the deploy finished.","delaySeconds":600}`},

	{Type: "botSetStatus", Category: BotProfile, Doc: "set your status: online, idle, dnd or invisible",
		Fields: []Field{req("status", String)}, Example: `{"type":"botSetStatus","status":"idle"}`},
	{Type: "botSetActivity", Category: BotProfile, Doc: "set your activity: playing, listening, watching, competing or custom",
		Fields:  []Field{req("activity", String), req("text", String)},
		Example: `{"type":"botSetActivity","activity":"watching","text":"the build"}`},
	{Type: "botSetNickname", Category: BotProfile, Doc: "set your nickname in this server",
		Fields: []Field{req("nickname", String)}, Example: `{"type":"botSetNickname","nickname":"Tova"}`},

	{Type: "modelShow", Category: Config, Query: true, Doc: "show the model this channel uses",
		Example: `{"type":"modelShow"}`},
	{Type: "modelSet", Category: Config, Doc: `set this channel's model (as /model; "" goes back to the default)`,
		Fields: []Field{req("model", String)}, Example: `{"type":"modelSet","model":"sonnet"}`},
}

// byType indexes Specs.
var byType = func() map[string]*Spec {
	m := make(map[string]*Spec, len(Specs))
	for i := range Specs {
		m[Specs[i].Type] = &Specs[i]
	}
	return m
}()

// Lookup returns the spec of an action type.
func Lookup(typ string) (*Spec, bool) {
	s, ok := byType[typ]
	return s, ok
}
