package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"

	"github.com/agentgateway/gateway/internal/actions"
	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
)

// QuestionsFile keeps, in CONFIG_DIR, the reaction prompts waiting for an
// answer.
const QuestionsFile = "reaction-prompts.json"

// questionsVersion is the format of QuestionsFile.
const questionsVersion = 1

// ReactionPromptTTL is how long a reaction prompt waits for its answer.
const ReactionPromptTTL = 24 * time.Hour

// ErrNoApprovers refuses a scheduled run's question when nobody may
// answer it.
var ErrNoApprovers = errors.New("only an approver can answer a question from a scheduled or webhook run, and neither APPROVER_IDS nor APPROVER_ROLE_IDS is set")

// reactionPrompts are the questions waiting for a reaction, by message,
// kept in path (when set) so that a restart does not drop an answer.
type reactionPrompts struct {
	path string
	// mu guards open and the file: each change is written while it is
	// held, so the file follows the changes in order.
	mu   sync.Mutex
	open map[discord.MessageID]*reactionPrompt
}

// reactionPrompt is one open question, as QuestionsFile keeps it.
type reactionPrompt struct {
	Message  discord.MessageID `json:"message"`
	Channel  discord.ChannelID `json:"channel"`
	Guild    string            `json:"guild,omitempty"`
	Question string            `json:"question"`
	Emoji    []string          `json:"emoji"`
	// Asker may answer; empty with Restricted: only an approver may.
	Asker string `json:"asker,omitempty"`
	// Restricted is set for a scheduled or webhook run's question (or
	// one asked by the answer to such a question): its answer carries
	// the run's restrictions and only an approver gives it.
	Restricted bool      `json:"restricted,omitempty"`
	Expires    time.Time `json:"expires"`
}

type questionsFile struct {
	Version int               `json:"version"`
	Open    []*reactionPrompt `json:"open"`
}

// load reads the open questions kept at path, dropping the expired ones.
// A missing file is none.
func (q *reactionPrompts) load(path string, now time.Time) error {
	q.path = path
	q.open = map[discord.MessageID]*reactionPrompt{}
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var f questionsFile
	if err := json.Unmarshal(b, &f); err != nil || f.Version != questionsVersion {
		return fmt.Errorf("%s is not a version %d file of reaction prompts", QuestionsFile, questionsVersion)
	}
	for _, p := range f.Open {
		if p != nil && p.Message.IsValid() && p.Channel.IsValid() && now.Before(p.Expires) {
			q.open[p.Message] = p
		}
	}
	return nil
}

// saveLocked writes the open questions; q.mu is held.
func (q *reactionPrompts) saveLocked() error {
	if q.path == "" {
		return nil
	}
	f := questionsFile{Version: questionsVersion, Open: make([]*reactionPrompt, 0, len(q.open))}
	for _, p := range q.open {
		f.Open = append(f.Open, p)
	}
	slices.SortFunc(f.Open, func(a, b *reactionPrompt) int { return a.Message.Time().Compare(b.Message.Time()) })
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(q.path, b, 0o600)
}

// pruneLocked forgets the expired questions; q.mu is held.
func (q *reactionPrompts) pruneLocked(now time.Time) {
	for id, p := range q.open {
		if !now.Before(p.Expires) {
			delete(q.open, id)
		}
	}
}

// AskWithReactions posts question with one reaction per emoji (2-9, plain
// Unicode emoji) and, when someone who may answer reacts with one of them,
// queues that answer as a new prompt in the channel: the agent takes it up
// as a new turn (actions.Reactions). The person who sent the prompt may
// answer; a scheduled or webhook run's question (t.Scheduled) only an
// approver may, and its answer keeps the run's restrictions
// (queue.Event.Restricted). Questions wait for ReactionPromptTTL, kept in
// Options.QuestionsPath across restarts.
func (b *Bot) AskWithReactions(ctx context.Context, t actions.Turn, channelID, question string, emoji []string) (string, error) {
	for _, e := range emoji {
		if e == "" || strings.ContainsAny(e, "<>:") || len(e) > 32 {
			return "", fmt.Errorf("%q is not a plain emoji", e)
		}
	}
	ch, err := parseID("channel", channelID)
	if err != nil {
		return "", err
	}
	// Without an author to hold to, only an approver may answer, and the
	// answer may do no more than the turn that asked.
	restricted := t.Scheduled || t.UserID == ""
	if restricted && len(b.opts.Approvers) == 0 && len(b.opts.ApproverRoles) == 0 {
		return "", ErrNoApprovers
	}
	text := "❓ " + question + "\n-# React with " + strings.Join(emoji, " ") + " to answer."
	if restricted {
		text += " Only an approver's answer counts."
	}
	msgID, err := b.Send(ctx, channelID, text, nil)
	if err != nil {
		return "", err
	}
	id, _ := parseID("message", msgID)
	p := &reactionPrompt{Message: discord.MessageID(id), Channel: discord.ChannelID(ch), Guild: t.GuildID,
		Question: question, Emoji: emoji, Restricted: restricted}
	if !restricted {
		p.Asker = t.UserID
	}
	q := &b.questions
	q.mu.Lock()
	now := b.clock.Now()
	p.Expires = now.Add(ReactionPromptTTL)
	q.pruneLocked(now)
	q.open[p.Message] = p
	err = q.saveLocked()
	q.mu.Unlock()
	if err != nil {
		b.log.Warn().Err(files.WithoutPath(err)).Str("file", QuestionsFile).Msg("could not keep the open reaction prompts; an answer given after a restart will be missed")
	}
	for _, e := range emoji {
		if err := b.client(ctx).React(discord.ChannelID(ch), discord.MessageID(id), discord.APIEmoji(e)); err != nil {
			return msgID, fmt.Errorf("add the reaction %s: %w", e, err)
		}
	}
	return msgID, nil
}

// mayAnswer reports whether user, with roles, may answer p.
func (b *Bot) mayAnswer(p *reactionPrompt, user string, roles []string) bool {
	if p.Restricted {
		return b.isApprover(user, roles)
	}
	return p.Asker == "" || user == p.Asker
}

// reactionAnswer takes a reaction to an open question: the answer becomes
// a prompt in the channel. It reports whether the reaction was one.
func (b *Bot) reactionAnswer(ev *gateway.MessageReactionAddEvent) bool {
	q := &b.questions
	q.mu.Lock()
	p := q.open[ev.MessageID]
	if p == nil {
		q.mu.Unlock()
		return false
	}
	if !b.clock.Now().Before(p.Expires) {
		delete(q.open, ev.MessageID)
		err := q.saveLocked()
		q.mu.Unlock()
		if err != nil {
			b.log.Warn().Err(files.WithoutPath(err)).Str("file", QuestionsFile).Msg("could not forget an expired reaction prompt")
		}
		return true
	}
	user, roles := ev.UserID.String(), memberRoles(ev.Member)
	if ev.ChannelID != p.Channel || !slices.Contains(p.Emoji, ev.Emoji.Name) ||
		!b.mayAnswer(p, user, roles) || !b.allowed(ev.UserID, ev.ChannelID, ev.GuildID, roles...) {
		q.mu.Unlock()
		b.log.Debug().Str("channel", ev.ChannelID.String()).Str("user", user).Msg("a reaction to a reaction prompt that is not an answer, or not from someone who may answer it")
		return true
	}
	delete(q.open, ev.MessageID)
	if err := q.saveLocked(); err != nil {
		b.log.Warn().Err(files.WithoutPath(err)).Str("file", QuestionsFile).Msg("could not record that a reaction prompt was answered")
	}
	q.mu.Unlock()
	name := user
	if ev.Member != nil {
		name = displayName(ev.Member.User, ev.Member)
	}
	e := queue.Event{
		Kind: queue.KindMessage, Source: Source, ChannelID: ev.ChannelID.String(), GuildID: p.Guild,
		Text:   fmt.Sprintf("[Answer to your question %q: %s reacted %s]", p.Question, name, ev.Emoji.Name),
		UserID: user, Author: name, ReplyTo: ev.MessageID.String(), Restricted: p.Restricted,
		// The journal refuses a second answer to the same question (a
		// restart between queueing it and recording it answered).
		Key: "reaction:" + ev.MessageID.String(),
	}
	undo := b.markPrompt(&e)
	if _, err := b.intake.Enqueue(e); err != nil {
		undo()
		if errors.Is(err, queue.ErrDuplicate) {
			return true
		}
		b.log.Warn().Err(err).Str("channel", e.ChannelID).Msg("the answer to a reaction prompt was not queued; the question stays open")
		q.mu.Lock()
		q.open[p.Message] = p
		if err := q.saveLocked(); err != nil {
			b.log.Warn().Err(files.WithoutPath(err)).Str("file", QuestionsFile).Msg("could not keep the open reaction prompts")
		}
		q.mu.Unlock()
		return true
	}
	b.log.Info().Str("channel", e.ChannelID).Str("emoji", ev.Emoji.Name).Bool("restricted", p.Restricted).Msg("reaction prompt answered")
	return true
}
