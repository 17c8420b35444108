package discord

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/queue"
)

// ask posts a reaction prompt for t and returns its message.
func (tb *testBot) ask(t actions.Turn, question string) discord.MessageID {
	tb.t.Helper()
	id, err := tb.AskWithReactions(actionCtx(tb.t), t, tb.channel.String(), question, []string{"✅", "❌"})
	if err != nil {
		tb.t.Fatalf("AskWithReactions: %v", err)
	}
	sf, err := discord.ParseSnowflake(id)
	if err != nil {
		tb.t.Fatal(err)
	}
	return discord.MessageID(sf)
}

// answers waits until the intake has n events and returns them.
func (tb *testBot) answers(n int) []queue.Event {
	tb.t.Helper()
	tb.fd.Wait(tb.t, "the answers queued", waitLong, func() bool { return len(tb.intake.taken()) >= n })
	return tb.intake.taken()
}

// restart closes the bot and connects a new one with opts to the same
// fake Discord, as a gateway restart over the same CONFIG_DIR does.
func (tb *testBot) restart(opts Options) *testBot {
	tb.t.Helper()
	tb.Bot.Close()
	next := *tb
	next.intake = &testIntake{}
	opts.Token, opts.APIBaseURL, opts.GatewayURL = tb.fd.Token, tb.fd.APIBaseURL(), tb.fd.GatewayURL()
	opts.FastReconnect = true
	b, err := New(opts, zerolog.New(tb.logs))
	if err != nil {
		tb.t.Fatal(err)
	}
	next.Bot = b
	ctx, cancel := context.WithTimeout(context.Background(), waitLong)
	defer cancel()
	if err := b.Open(ctx, next.intake, noSessions{}); err != nil {
		tb.t.Fatal(err)
	}
	tb.t.Cleanup(func() { b.Close() })
	return &next
}

// approver is in APPROVER_IDS.
var approver = discord.User{ID: 900000000000000009, Username: "root"}

// answerOpts compares the answers' events on what the reaction decides.
var answerOpts = cmpopts.IgnoreFields(queue.Event{}, "ID", "Time", "Source", "GuildID", "Text", "Author", "Key")

// A scheduled run's question is answered only by an approver, and the
// answer carries the run's restrictions (queue.Event.Restricted): the
// turn it starts may do no more than the run that asked. A person's
// question is answered by that person, with their own rights.
func TestReactionPromptAnswerInheritsTheAskersRestrictions(t *testing.T) {
	tb := startBot(t, Options{Approvers: []string{approver.ID.String()}})
	stranger := tb.fd.User("mallory")

	scheduled := tb.ask(actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), Scheduled: true}, "Deploy now?")
	person := tb.ask(actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), UserID: tb.user.ID.String()}, "Merge now?")

	tb.fd.React(tb.channel, scheduled, stranger, "✅") // not an approver: ignored
	tb.fd.React(tb.channel, scheduled, tb.user, "✅")  // nor is the channel's user
	tb.fd.React(tb.channel, person, stranger, "✅")    // not the asker: ignored
	tb.fd.React(tb.channel, scheduled, approver, "❌")
	tb.fd.React(tb.channel, person, tb.user, "✅")
	got := tb.answers(2)
	want := []queue.Event{
		{Kind: queue.KindMessage, ChannelID: tb.channel.String(), UserID: approver.ID.String(), ReplyTo: scheduled.String(), Restricted: true},
		{Kind: queue.KindMessage, ChannelID: tb.channel.String(), UserID: tb.user.ID.String(), ReplyTo: person.String()},
	}
	if diff := cmp.Diff(want, got, answerOpts); diff != "" {
		t.Errorf("answers queued (-want +got):\n%s", diff)
	}
}

// Without APPROVER_IDS nobody could answer a scheduled run's question:
// it is refused before anything is posted.
func TestReactionPromptOfAScheduledRunNeedsApprovers(t *testing.T) {
	tb := startBot(t, Options{})
	_, err := tb.AskWithReactions(actionCtx(t), actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), Scheduled: true},
		tb.channel.String(), "Deploy now?", []string{"✅", "❌"})
	if err == nil {
		t.Fatal("a scheduled run's question was asked with no approver to answer it")
	}
	if msgs := tb.fd.BotMessages(tb.channel); len(msgs) != 0 {
		t.Errorf("posted %d messages, want none", len(msgs))
	}
}

// Open questions outlive a restart: asked before it, answered after it,
// the answer is queued with the restrictions of the run that asked. A
// question is answered once, and not after it expired.
func TestReactionPromptSurvivesRestart(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), QuestionsFile)
	opts := Options{Clock: clock, QuestionsPath: path, Approvers: []string{approver.ID.String()}}
	first := startBot(t, opts)

	scheduled := first.ask(actions.Turn{GuildID: first.guild.String(), ChannelID: first.channel.String(), Scheduled: true}, "Deploy now?")
	person := first.ask(actions.Turn{GuildID: first.guild.String(), ChannelID: first.channel.String(), UserID: first.user.ID.String()}, "Merge now?")
	clock.Advance(ReactionPromptTTL / 2)
	late := first.ask(actions.Turn{GuildID: first.guild.String(), ChannelID: first.channel.String(), UserID: first.user.ID.String()}, "Tag now?")

	second := first.restart(opts)
	second.fd.React(second.channel, scheduled, approver, "✅")
	second.fd.React(second.channel, person, second.user, "❌")
	got := second.answers(2)
	want := []queue.Event{
		{Kind: queue.KindMessage, ChannelID: second.channel.String(), UserID: approver.ID.String(), ReplyTo: scheduled.String(), Restricted: true},
		{Kind: queue.KindMessage, ChannelID: second.channel.String(), UserID: second.user.ID.String(), ReplyTo: person.String()},
	}
	if diff := cmp.Diff(want, got, answerOpts); diff != "" {
		t.Errorf("answers queued after the restart (-want +got):\n%s", diff)
	}

	// Answered questions stay answered across the next restart; the
	// first two expire, the late one is still open.
	clock.Advance(ReactionPromptTTL/2 + time.Second)
	third := second.restart(opts)
	third.fd.React(third.channel, person, third.user, "✅")
	third.fd.React(third.channel, late, third.user, "✅")
	got = third.answers(1)
	want = []queue.Event{{Kind: queue.KindMessage, ChannelID: third.channel.String(), UserID: third.user.ID.String(), ReplyTo: late.String()}}
	if diff := cmp.Diff(want, got, answerOpts); diff != "" {
		t.Errorf("answers queued after the second restart (-want +got):\n%s", diff)
	}
}

// A question not answered within ReactionPromptTTL is closed: a reaction
// after that is not an answer.
func TestReactionPromptExpires(t *testing.T) {
	clock := clockwork.NewFakeClock()
	tb := startBot(t, Options{Clock: clock})
	old := tb.ask(actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), UserID: tb.user.ID.String()}, "Old?")
	clock.Advance(ReactionPromptTTL / 2)
	fresh := tb.ask(actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), UserID: tb.user.ID.String()}, "New?")
	clock.Advance(ReactionPromptTTL/2 + time.Second)
	tb.fd.React(tb.channel, old, tb.user, "✅")
	tb.fd.React(tb.channel, fresh, tb.user, "✅")
	got := tb.answers(1)
	want := []queue.Event{{Kind: queue.KindMessage, ChannelID: tb.channel.String(), UserID: tb.user.ID.String(), ReplyTo: fresh.String()}}
	if diff := cmp.Diff(want, got, answerOpts); diff != "" {
		t.Errorf("answers queued (-want +got):\n%s", diff)
	}
}

// Whatever QuestionsFile holds, loading it never panics and keeps only
// questions with a message, a channel and time left.
func FuzzLoadQuestions(f *testing.F) {
	now := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	f.Add([]byte(`{"version":1,"open":[{"message":"1575604923154825216","channel":"1575604923142242305","question":"Q?","emoji":["✅","❌"],"restricted":true,"expires":"2026-05-05T09:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"open":[null,{"message":"0","channel":"1","expires":"2030-01-01T00:00:00Z"},{"message":"2","channel":"3","expires":"2020-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":2,"open":[]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), QuestionsFile)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var q reactionPrompts
		err := q.load(path, now)
		if err != nil && len(q.open) != 0 {
			t.Fatalf("load failed (%v) yet kept %d questions", err, len(q.open))
		}
		for id, p := range q.open {
			if id != p.Message || !p.Message.IsValid() || !p.Channel.IsValid() || !now.Before(p.Expires) {
				t.Fatalf("kept %+v under %v", p, id)
			}
		}
	})
}

// APPROVER_ROLE_IDS counts for a scheduled run's question as APPROVER_IDS
// does: a member with the role answers it, with the run's restrictions.
func TestReactionPromptOfAScheduledRunAnsweredByAnApproverRole(t *testing.T) {
	const role = discord.RoleID(770000000000000077)
	tb := startBot(t, Options{ApproverRoles: []string{role.String()}})
	member := tb.fd.User("ops")
	tb.fd.SetRoles(tb.guild, member, role)
	scheduled := tb.ask(actions.Turn{GuildID: tb.guild.String(), ChannelID: tb.channel.String(), Scheduled: true}, "Deploy now?")
	tb.fd.React(tb.channel, scheduled, tb.user, "✅") // no role: ignored
	tb.fd.React(tb.channel, scheduled, member, "❌")
	got := tb.answers(1)
	want := []queue.Event{{Kind: queue.KindMessage, ChannelID: tb.channel.String(), UserID: member.ID.String(), ReplyTo: scheduled.String(), Restricted: true}}
	if diff := cmp.Diff(want, got, answerOpts); diff != "" {
		t.Errorf("answers queued (-want +got):\n%s", diff)
	}
}
