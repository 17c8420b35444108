// Package discord connects the gateway to Discord through arikawa.
//
// Intake turns mentions, direct messages and the /claude slash command into
// queue events, in Discord's order within a channel; the outbox delivers
// replies (split, capped, never pinging, retried without duplicates) and
// keeps the typing indicator alive while a run is in progress. The runtime
// sees only the agent.Replier interface; nothing outside this package knows
// arikawa.
//
// Concurrency: intake runs on arikawa's event loop, in order. Reply only
// hands a reply over: each channel has one delivery goroutine that posts the
// channel's replies in the order they were handed over and owns their
// retries, so a Discord outage never holds a queue slot. Flush waits for the
// replies still on their way; Close stops everything. A Bot is safe for
// concurrent use.
package discord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/diamondburned/arikawa/v3/gateway"
	"github.com/diamondburned/arikawa/v3/session"
	"github.com/diamondburned/arikawa/v3/state"
	"github.com/diamondburned/arikawa/v3/state/store"
	"github.com/diamondburned/arikawa/v3/state/store/defaultstore"
	"github.com/diamondburned/arikawa/v3/utils/handler"
	"github.com/diamondburned/arikawa/v3/utils/httputil/httpdriver"
	"github.com/diamondburned/arikawa/v3/utils/ws"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/queue"
)

// DefaultGatewayURL is Discord's gateway, used when Options.GatewayURL is
// empty.
const DefaultGatewayURL = "wss://gateway.discord.gg"

// Intents are what the bot subscribes to: guild metadata (channel and role
// names), guild and direct messages with their content, and reactions.
// Message Content is privileged: it must be enabled for the application in
// the Developer Portal.
const Intents = gateway.IntentGuilds |
	gateway.IntentGuildMessages |
	gateway.IntentDirectMessages |
	gateway.IntentMessageContent |
	gateway.IntentGuildMessageReactions |
	gateway.IntentDirectMessageReactions

// Options configures a Bot.
type Options struct {
	Token string
	// APIBaseURL replaces https://discord.com/api/v9 (a REST proxy, a fake).
	APIBaseURL string
	// GatewayURL replaces Discord's gateway URL.
	GatewayURL string
	// Transport carries REST requests; nil means http.DefaultTransport.
	Transport http.RoundTripper
	Access    Access
	// TypingInterval is how often the typing indicator is renewed; Discord
	// shows it for about 10 s. Zero means 8 s.
	TypingInterval time.Duration
	// DeliveryBackoff is the first wait before a reply that Discord refused
	// with a 5xx (or that failed on the network) is tried again; each retry
	// doubles it, up to DeliveryMaxBackoff. Zero means 1 s.
	DeliveryBackoff time.Duration
	// DeliveryMaxBackoff caps the wait between retries. Zero means 1 min.
	DeliveryMaxBackoff time.Duration
	// DeliveryWindow is how long a reply is kept and retried while Discord
	// cannot take it; after that it is dropped (and logged with its
	// length). Zero means 15 min.
	DeliveryWindow time.Duration
	// MaxReplyMessages caps the messages of one reply (MAX_REPLY_MESSAGES):
	// a longer answer is posted as its first MaxReplyMessages-1 messages and
	// a last one saying it was cut, with the whole answer attached as
	// answer.md. Zero means 10.
	MaxReplyMessages int
	// UploadLimit is the largest file Discord takes from the bot, in bytes;
	// an answer.md beyond it holds the answer's beginning. Zero means
	// 10 MiB, the limit of a guild without boosts.
	UploadLimit int
	// Files reads the files the agent sends (its outbox, sendFile) as the
	// agent could, refusing the gateway's state; nil reads them as the
	// gateway's user, still never through a link.
	Files *files.Guard
	// Clock drives retries and the busy-notice rate limit; nil is the real
	// clock.
	Clock clockwork.Clock
	// CatchUpTimeout bounds the history fetch after a reconnect that could
	// not resume. Zero means 20 s.
	CatchUpTimeout time.Duration
	// StatePath, if set, keeps the newest message seen per channel across
	// restarts (StateFile in CONFIG_DIR): at start the bot answers the
	// prompts posted while it was down.
	StatePath string
	// QuestionsPath, if set, keeps the open reaction prompts across
	// restarts (QuestionsFile in CONFIG_DIR); empty: in memory only.
	QuestionsPath string
	// MaxCatchUpAge skips missed prompts older than this; zero means 6 h.
	MaxCatchUpAge time.Duration
	// Seen, if set, keeps the newest message seen per channel instead of
	// StatePath (the gateway's inbox, which records it with the events).
	Seen SeenStore
	// Deliveries, if set, records each reply and the delivery of each of
	// its messages, so that a restart finishes a reply without posting any
	// message twice (see Resume).
	Deliveries DeliveryLog
	// WatchingSince is when the gateway began keeping what it saw (the
	// inbox's creation): after a restart, prompts posted since then (and
	// within MaxCatchUpAge) in a channel the bot had never seen a message
	// in are caught up too. Zero: only channels with a known message are.
	WatchingSince time.Time
	// NoncePrefix starts every message nonce. It must be unique to the
	// store that numbers events (the inbox's), so that nonces never repeat
	// across restarts. Empty: random per process.
	NoncePrefix string
	// TurnCard is what the live card of a turn becomes when the turn ends:
	// "receipt" (the default), "delete", or "off" for no card.
	TurnCard string
	// CardDelay is how long a turn runs before its card appears (unless
	// it calls a tool first); zero means 1.5 s. CardEvery is the least
	// time between two edits of a card; zero means 1.2 s.
	CardDelay, CardEvery time.Duration
	// CardWarning, if set, returns a line the card shows from its start
	// (a budget nearly used up); "" for none.
	CardWarning func(queue.Event) string
	// IntakeStopped, if set, is called when StopIntake is: the gateway
	// begins to stop (prompts waiting for a usage limit let go).
	IntakeStopped func()
	// Steer, if set, is offered each prompt that has to wait behind its
	// channel's running turn; it reports whether the prompt was written
	// into that turn (STEER=steer). Such a prompt gets a 📨 instead of ⏳.
	Steer func(queue.Event) bool
	// SendNow offers "Send now" (a ⏩ reaction the author can click) on
	// each prompt that waits behind its channel's running turn
	// (STEER=queue).
	SendNow bool
	// ApprovalTimeout is how long a tool approval waits for an answer
	// before it is denied; zero means DefaultApprovalTimeout.
	ApprovalTimeout time.Duration
	// Approvers may answer any tool approval (APPROVER_IDS); a prompt's
	// author may always answer their own.
	Approvers []string
	// ApproverRoles are roles whose members may answer as Approvers may
	// (APPROVER_ROLE_IDS); a direct message carries no roles.
	ApproverRoles []string
	// UserSessions gives each person their own session in a shared
	// channel (SESSION_SCOPE=user): a prompt's event carries a session key
	// of its channel and author. The lane stays the channel's, so turns
	// keep their order; settings stay the channel's.
	UserSessions bool
	// NotifyAfter: the answer of a turn that ran longer than this mentions
	// its author in its first message, pinging them and nobody else
	// (NOTIFY_AFTER). Zero never does.
	NotifyAfter time.Duration
	// FastReconnect drops arikawa's identify throttle and shortens its
	// reconnect delay; only for tests against a local fake.
	FastReconnect bool
	// Monitor, if set, is told about requests, the connection and
	// catch-ups (the admin server's metrics).
	Monitor Monitor
	// Threads turns on a thread per task (THREADS=auto).
	Threads ThreadOptions
	// Elsewhere is set when turns run on other processes too (NATS_URL
	// with workers): what concerns a turn this process does not run is
	// passed on there, and a waiting prompt's ⏳ is left for the process
	// that runs it to remove.
	Elsewhere Elsewhere
	// Voice turns voice messages into prompts (TRANSCRIBE_URL).
	Voice VoiceOptions
}

// Intake is where accepted prompts go, and what /claude-stop stops.
type Intake interface {
	Enqueue(queue.Event) (queue.Receipt, error)
	// Stop cancels the lane's running event and drops its waiting ones.
	Stop(lane string) (running bool, dropped []queue.Event)
	// Cancel cancels the lane's running event if it is event id.
	Cancel(lane string, id uint64) bool
	// Lane returns the lane's running event and its waiting ones.
	Lane(lane string) (running queue.Event, ok bool, waiting []queue.Event)
}

// SeenMessage is the newest message seen in a channel.
type SeenMessage struct{ Channel, Message, Guild string }

// SeenStore keeps the newest message seen per channel across restarts.
type SeenStore interface {
	LastSeen() []SeenMessage
	SaveSeen([]SeenMessage) error
}

// DeliveryLog records what happens to replies (see Options.Deliveries).
// Handed is called when a reply is handed to the outbox, as the turn ends:
// the event finishes at Settled, not with its turn. Replied records the
// reply on the outbox's goroutine for the channel before its first message
// is posted, so the turn's lane goes on without waiting for the disk and
// the replies of many channels share a sync; ErrTakenOver from it means
// another process answers, and nothing is posted. Delivered is called after
// each of the reply's messages was posted (chunk counts from 0); Settled
// once the reply was posted whole (delivered) or given up on (Discord
// refused it, or did not take it within the delivery window), but not when
// the bot stopped with the reply still pending: a restart delivers that
// one.
type DeliveryLog interface {
	Handed(event uint64)
	Replied(event uint64, text string, files []string) error
	Delivered(event uint64, chunk int, messageID string)
	Settled(event uint64, delivered bool)
}

// Keeper is an optional ability of an Intake: it stores an event for the
// next start without running it (queue.Queue.Keep). With it, a prompt that
// arrives while the gateway stops is kept instead of refused.
type Keeper interface {
	Keep(queue.Event) (queue.Event, error)
}

// Submitter is an optional ability of an Intake: Submit places an event in
// the journal's order and returns without waiting for the disk, and the
// Pending's Wait says whether it was accepted (queue.Queue.Submit). With
// it, the intake takes the next message while the last one's record is
// written, and the records of a burst share one fsync.
type Submitter interface {
	Submit(queue.Event) (*queue.Pending, error)
}

// stillWaiting reports whether e waits in its lane: not started, not
// dropped.
func (b *Bot) stillWaiting(e queue.Event) bool {
	_, _, waiting := b.intake.Lane(e.Lane)
	for _, w := range waiting {
		if w.ID == e.ID {
			return true
		}
	}
	return false
}

// RestartingNotice answers a prompt that will be answered after a restart;
// RestartingTag is its nonce tag (Notify), so it shows once per prompt
// whoever posts it.
const (
	RestartingNotice = "The gateway is restarting; this prompt stays queued and is answered when it is back."
	RestartingTag    = "r"
)

// SessionResetter forgets a channel's session binding.
type SessionResetter interface {
	Delete(key string) (bool, error)
}

// Bot is the Discord side of the gateway.
type Bot struct {
	opts  Options
	state *state.State
	log   zerolog.Logger
	// noncePrefix makes message nonces unique across restarts (event ids
	// start again at 1).
	noncePrefix string
	// handshake tells Open about a gateway URL that can never work.
	handshake *handshakeConn
	// dials follows failed dials: an outage is reported once, and Open's
	// error names its cause.
	dials *dials

	intake Intake
	// mark is applied to every prompt before the intake (SetPromptMark).
	mark     func(e *queue.Event) (undo func())
	sessions SessionResetter
	// stopping is set when intake is closed for shutdown.
	stopping atomic.Bool

	// conn is the state of the gateway connection (see Connected).
	conn connection

	// me is the bot's user and application, set at READY.
	botID atomic.Uint64
	appID atomic.Uint64

	// mu guards the fields below and is held across Enqueue so that an
	// event cannot start before its bookkeeping is in place.
	mu sync.Mutex
	// lastSeen is the newest message seen per channel: the resume point of
	// the catch-up after a reconnect, and the duplicate filter.
	lastSeen map[discord.ChannelID]seen
	// marks are the "waiting" reactions of queued prompts, by event id.
	marks map[uint64]*mark
	// typing cancels each running event's typing loop, by event id.
	typing map[uint64]context.CancelFunc
	// interactions are the slash commands awaiting their answer, by the
	// event's ReplyTo.
	interactions map[string]*interaction
	readies      int
	registered   bool
	// restored is set when lastSeen came from StatePath: the first READY
	// catches up too. dirty marks lastSeen changed since the last save.
	restored bool
	dirty    bool
	// persisted is closed when the state has been saved at Close.
	persisted chan struct{}
	// held are the live messages of channels being caught up, by channel;
	// a channel is in the map while its catch-up runs.
	held map[discord.ChannelID][]heldMessage
	// busyNoticed is when each channel was last told the queue is full;
	// within busyNoticeEvery further refusals only get a reaction.
	busyNoticed map[discord.ChannelID]time.Time
	// opening are the threads being opened for prompts, by thread id.
	opening map[string]*opening
	// threadsTold are the channels told why their prompts get no thread.
	threadsTold map[discord.ChannelID]bool
	// ctx lives as long as the connection; background work uses it.
	ctx    context.Context
	cancel context.CancelFunc

	// clock is opts.Clock; out, the replies on their way, and buttons, the
	// press handlers, have their own locks.
	clock    clockwork.Clock
	out      outbox
	buttons  buttons
	commands commands
	// turns are the running events' cards, by event id (guarded by mu).
	turns map[uint64]*turn
	// adopted are the slash commands another process received that this
	// one answered (Elsewhere): each is taken over once.
	adopted map[string]time.Time
	// approvals are the open tool approvals (with their own lock).
	approvals approvals
	// confirms are the destructive actions waiting for a person.
	confirms confirmations
	// questions are the reaction prompts waiting for an answer.
	questions reactionPrompts
	// presence is the status and activity the agent set.
	presence presence
}

// seen is the newest message of a channel and the channel's guild.
type seen struct {
	message discord.MessageID
	guild   discord.GuildID
}

// mark is the reaction placed on a prompt that waits in the queue.
type mark struct {
	channel discord.ChannelID
	message discord.MessageID
	// placed is closed when the reaction call has returned.
	placed chan struct{}
	// gone is closed (under Bot.mu, by leftLocked) when the mark leaves
	// Bot.marks: the prompt started or was dropped.
	gone chan struct{}
	// offer fires the ⏩ "Send now" offer after SendNowDelay; nil when
	// none is made. A timer, not a goroutine per waiting prompt: a busy
	// gateway has thousands waiting a moment, and their stacks add up.
	offer clockwork.Timer
	// offered is closed once the offer was placed, or will not be;
	// sendNow (guarded by Bot.mu) is set when it was.
	offered chan struct{}
	sendNow bool
}

// interaction is a deferred slash command.
type interaction struct {
	app     discord.AppID
	token   string
	channel discord.ChannelID
	expires time.Time
	// acked is closed once the deferral has been sent.
	acked chan struct{}
	// cardOwned is set when the turn card is the response: the answer
	// then goes in follow-ups, and the card stays its receipt.
	cardOwned atomic.Bool
}

// New builds a bot; Open connects it.
func New(opts Options, log zerolog.Logger) (*Bot, error) {
	if opts.Token == "" {
		return nil, errors.New("no Discord bot token")
	}
	if opts.TypingInterval <= 0 {
		opts.TypingInterval = 8 * time.Second
	}
	if opts.DeliveryBackoff <= 0 {
		opts.DeliveryBackoff = time.Second
	}
	if opts.DeliveryMaxBackoff <= 0 {
		opts.DeliveryMaxBackoff = time.Minute
	}
	if opts.DeliveryMaxBackoff < opts.DeliveryBackoff {
		opts.DeliveryMaxBackoff = opts.DeliveryBackoff
	}
	if opts.DeliveryWindow <= 0 {
		opts.DeliveryWindow = 15 * time.Minute
	}
	if opts.MaxReplyMessages <= 0 {
		opts.MaxReplyMessages = 10
	}
	if opts.UploadLimit <= 0 {
		opts.UploadLimit = DefaultUploadLimit
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.CatchUpTimeout <= 0 {
		opts.CatchUpTimeout = 20 * time.Second
	}
	if opts.MaxCatchUpAge <= 0 {
		opts.MaxCatchUpAge = 6 * time.Hour
	}
	if opts.CardDelay <= 0 {
		opts.CardDelay = 1500 * time.Millisecond
	}
	if opts.CardEvery <= 0 {
		opts.CardEvery = 1200 * time.Millisecond
	}
	rt, err := newTransport(opts.Transport, opts.APIBaseURL)
	if err != nil {
		return nil, err
	}
	if opts.Monitor != nil {
		rt.observe = opts.Monitor.Request
	}
	gatewayURL := opts.GatewayURL
	if gatewayURL == "" {
		gatewayURL = DefaultGatewayURL
	}

	// arikawa's convenience constructors read Discord's URLs from package
	// globals; building the gateway and REST client by hand is what lets
	// both point elsewhere.
	id := gateway.DefaultIdentifier("Bot " + opts.Token)
	id.AddIntents(Intents)
	gwOpts := gateway.DefaultGatewayOpts
	if opts.FastReconnect {
		id.IdentifyShortLimit, id.IdentifyGlobalLimit = nil, nil
		gwOpts.ReconnectDelay = func(int) time.Duration { return 50 * time.Millisecond }
	}
	// The codec decodes INTERACTION_CREATE as interactionCreate, which keeps
	// the member's permissions that a button press carries.
	handshake := newHandshakeConn(ws.NewConn(ws.NewCodec(unmarshalers())), opts.GatewayURL != "")
	gw := gateway.FromWebsocketGateway(
		ws.NewGateway(ws.NewCustomWebsocket(handshake, gateway.AddGatewayParams(gatewayURL)), &gwOpts),
		gateway.State{Identifier: id},
	)
	sess := session.NewWithGateway(gw, handler.New())
	sess.Client.Client.Client = httpdriver.WrapClient(http.Client{Transport: rt, Timeout: 30 * time.Second})
	// The transport owns retries (see transport); arikawa must not repeat.
	sess.Client.Client.Retries = 1
	// arikawa v3.6.0 creates its query-string encoder on first use without
	// a lock; two first uses at once (two catch-ups) race. Create it now.
	_, _ = sess.Client.Client.SchemaEncoder.Encode(struct {
		Limit uint `schema:"limit"`
	}{1})

	// Cache what names and threads need; not messages, presences or voice.
	cab := defaultstore.New()
	cab.MessageStore = store.Noop
	cab.PresenceStore = store.Noop
	cab.VoiceStateStore = store.Noop
	cab.EmojiStore = store.Noop

	prefix := opts.NoncePrefix
	if prefix == "" {
		var nonce [4]byte
		rand.Read(nonce[:])
		prefix = hex.EncodeToString(nonce[:])
	}
	b := &Bot{
		opts:         opts,
		handshake:    handshake,
		dials:        newDials(gatewayURL, opts.GatewayURL != ""),
		state:        state.NewFromSession(sess, cab),
		log:          log,
		noncePrefix:  prefix,
		lastSeen:     make(map[discord.ChannelID]seen),
		marks:        make(map[uint64]*mark),
		typing:       make(map[uint64]context.CancelFunc),
		interactions: make(map[string]*interaction),
		busyNoticed:  make(map[discord.ChannelID]time.Time),
		held:         make(map[discord.ChannelID][]heldMessage),
		opening:      make(map[string]*opening),
		threadsTold:  make(map[discord.ChannelID]bool),
		turns:        make(map[uint64]*turn),
		clock:        opts.Clock,
		out:          newOutbox(),
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	if err := b.questions.load(opts.QuestionsPath, opts.Clock.Now()); err != nil {
		log.Warn().Err(files.WithoutPath(err)).Str("file", QuestionsFile).Msg("ignoring the open reaction prompts kept by the previous run: answers to them are not taken")
	}
	switch {
	case opts.Seen != nil:
		for _, sm := range opts.Seen.LastSeen() {
			ch, err1 := discord.ParseSnowflake(sm.Channel)
			msg, err2 := discord.ParseSnowflake(sm.Message)
			if err1 != nil || err2 != nil {
				continue
			}
			guild, _ := discord.ParseSnowflake(sm.Guild)
			b.lastSeen[discord.ChannelID(ch)] = seen{message: discord.MessageID(msg), guild: discord.GuildID(guild)}
		}
		b.restored = len(b.lastSeen) > 0
		b.persisted = make(chan struct{})
		go b.persist(5 * time.Second)
	case opts.StatePath != "":
		last, err := loadState(opts.StatePath)
		if err != nil {
			log.Warn().Err(files.WithoutPath(err)).Str("file", StateFile).Msg("ignoring the Discord state file: prompts sent while the gateway was down are not answered")
		}
		b.lastSeen, b.restored = last, len(last) > 0
		b.persisted = make(chan struct{})
		go b.persist(5 * time.Second)
	}
	// Sync handlers run in the gateway's order; intake must not reorder.
	b.watchConnection()
	b.state.AddSyncHandler(b.onReady)
	b.state.AddSyncHandler(b.onResumed)
	b.state.AddSyncHandler(b.onGuildCreate)
	b.state.AddSyncHandler(b.onMessage)
	b.state.AddSyncHandler(b.onInteraction)
	b.state.AddSyncHandler(b.onReaction)
	b.state.AddSyncHandler(b.onThreadDelete)
	b.buttons.add(stopButton, b.onStopPress)
	b.buttons.add(stopAllButton, b.onStopPress)
	b.buttons.add(approvalButton, b.onApprovalPress)
	// From the start: a Confirm an earlier run left is answered too.
	b.buttons.add(confirmPrefix, b.pressConfirm)
	b.watchDials()
	quietWebsocket.Do(func() {
		// arikawa prints websocket errors with the standard logger; they
		// are reported through BackgroundErrorEvent above as well.
		ws.WSError = func(error) {}
	})
	return b, nil
}

var quietWebsocket sync.Once

// FatalError is a gateway close that reconnecting cannot fix.
type FatalError struct {
	Code int
	Err  error
}

func (e *FatalError) Error() string {
	return fmt.Sprintf("Discord closed the connection (code %d): %s", e.Code, closeAdvice(e.Code))
}

func (e *FatalError) Unwrap() error { return e.Err }

// closeAdvice explains Discord's fatal close codes in words an operator can
// act on.
func closeAdvice(code int) string {
	switch code {
	case 4004:
		return "the bot token was rejected; copy it again from the Developer Portal (Bot > Reset Token) into DISCORD_BOT_TOKEN"
	case 4010, 4011:
		return "the bot needs sharding, which this gateway does not do yet"
	case 4012:
		return "the gateway API version is not supported"
	case 4013:
		return "the requested intents are invalid"
	case 4014:
		return "a privileged intent is not enabled; enable Message Content Intent in the Developer Portal (Bot > Privileged Gateway Intents)"
	}
	return "the connection cannot be resumed"
}

// fatal converts arikawa's error for a fatal close into a FatalError.
func fatal(err error) error {
	var ce *ws.CloseEvent
	if errors.As(err, &ce) && gateway.DefaultGatewayOpts.ErrorIsFatalClose(err) {
		return &FatalError{Code: ce.Code, Err: err}
	}
	return err
}

// Open connects to Discord and waits for READY, bounded by ctx. Prompts go
// to intake; /claude-reset deletes bindings from sessions.
func (b *Bot) Open(ctx context.Context, intake Intake, sessions SessionResetter) error {
	b.intake, b.sessions = intake, sessions
	// A first connection refused in a way no retry changes (a wrong
	// DISCORD_GATEWAY_URL) ends the wait at once.
	ctx, refused := context.WithCancelCause(ctx)
	defer refused(nil)
	b.handshake.watch(refused)
	defer b.handshake.watch(nil)
	b.dials.open(ctx)
	if err := b.state.Open(ctx); err != nil {
		// arikawa's loop has stopped (Open waits for it); its last
		// failed dial says why, not its closing ("failed to finalize
		// websocket: websocket is closed").
		cause := b.dials.giveUp()
		b.state.Close()
		var herr *HandshakeError
		if errors.As(context.Cause(ctx), &herr) {
			return fmt.Errorf("connect to Discord: %w", herr)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			if cause != nil {
				return fmt.Errorf("connect to Discord: %w", cause)
			}
			if gerr := b.state.GatewayError(); gerr != nil && !errors.Is(gerr, ws.ErrWebsocketClosed) && !errors.Is(gerr, context.Canceled) {
				err = gerr
			} else if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no READY from Discord's gateway in time: %w", err)
			}
		}
		return fmt.Errorf("connect to Discord: %w", fatal(err))
	}
	return nil
}

// Wait blocks until ctx ends (nil) or the connection fails for good.
func (b *Bot) Wait(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- b.state.Wait(b.ctx) }()
	select {
	case <-ctx.Done():
		return nil
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return fmt.Errorf("Discord connection lost: %w", fatal(err))
	}
}

// StopIntake makes the bot turn new prompts away with a shutdown notice;
// replies to accepted ones are still delivered.
func (b *Bot) StopIntake() {
	b.stopping.Store(true)
	if b.opts.IntakeStopped != nil {
		b.opts.IntakeStopped()
	}
}

// Close disconnects from Discord and stops background work. Replies still
// on their way are dropped, each logged with its length: call Flush first
// to give them time.
func (b *Bot) Close() error {
	b.cancel()
	b.out.wait(context.Background())
	if b.persisted != nil {
		<-b.persisted
	}
	b.mu.Lock()
	for id, stop := range b.typing {
		stop()
		delete(b.typing, id)
	}
	b.mu.Unlock()
	return b.state.Close()
}

func (b *Bot) me() discord.UserID { return discord.UserID(b.botID.Load()) }

func (b *Bot) onReady(r *gateway.ReadyEvent) {
	b.botID.Store(uint64(r.User.ID))
	b.appID.Store(uint64(r.Application.ID))
	b.mu.Lock()
	b.readies++
	again := b.readies > 1 || b.restored
	register := !b.registered
	b.registered = true
	b.mu.Unlock()

	b.log.Info().Str("user", r.User.Username).Int("guilds", len(r.Guilds)).Msg("connected to Discord")
	if register {
		go b.registerCommands(r.Application.ID)
	}
	if again {
		// A new session, not a resumed one (or a restart): Discord will
		// not replay what it sent while the bot was away.
		b.catchUp()
	}
}

func (b *Bot) onResumed(*gateway.ResumedEvent) {
	b.log.Info().Msg("Discord connection resumed")
}

// nonce is a message nonce (at most 25 characters) unique to one chunk of
// one event's reply in this process.
func (b *Bot) nonce(event uint64, chunk int) string {
	return fmt.Sprintf("%s%d.%d", b.noncePrefix, event, chunk)
}

// noticeNonce is the nonce of a gateway notice answering a message.
func (b *Bot) noticeNonce(message discord.MessageID) string {
	return fmt.Sprintf("%sn%d", b.noncePrefix, uint64(message)%1e15)
}

func displayName(u discord.User, m *discord.Member) string {
	if m != nil && m.Nick != "" {
		return m.Nick
	}
	if u.DisplayName != "" {
		return u.DisplayName
	}
	return u.Username
}
