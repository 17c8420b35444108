package discord

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/discord"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/card"
	"github.com/agentgateway/gateway/internal/files"
	"github.com/agentgateway/gateway/internal/transcribe"
)

// voiceMessageFlag marks a voice message (IS_VOICE_MESSAGE), a flag
// arikawa does not name.
const voiceMessageFlag discord.MessageFlags = 1 << 13

// transcribingEmoji marks a voice message while it is transcribed.
const transcribingEmoji = "🎙️"

// Defaults of VoiceOptions.
const (
	DefaultVoiceRetries      = 2
	DefaultVoiceRetryBackoff = 2 * time.Second
)

// Transcriber turns a recording into text (a *transcribe.Client).
type Transcriber interface {
	Transcribe(ctx context.Context, a transcribe.Audio) (string, error)
}

// VoiceOptions turn voice messages into prompts (TRANSCRIBE_URL).
type VoiceOptions struct {
	// Transcriber, if nil, leaves transcription off: a voice message is
	// answered with how to turn it on, and nothing runs.
	Transcriber Transcriber
	// Fetcher downloads the recording under the attachments' rules: from
	// Discord's servers only, at most its MaxFile bytes (MAX_ATTACHMENT_MB).
	// Nil or a MaxFile of 0 takes no voice messages.
	Fetcher *files.Fetcher
	// MaxDuration is the longest recording transcribed
	// (VOICE_MAX_SECONDS); zero is no limit but the size.
	MaxDuration time.Duration
	// Retries is how many more times a transcription that failed on the
	// endpoint's side (unreachable, 429, 5xx) is tried; RetryBackoff the
	// first wait, doubled each time. Zero means DefaultVoiceRetries and
	// DefaultVoiceRetryBackoff; Retries below zero tries once.
	Retries      int
	RetryBackoff time.Duration
}

// quoteHeard puts a voice prompt's transcript on its card, and shows the
// card at once: the user sees what was heard before the answer.
func (t *turn) quoteHeard() {
	if !t.e.Voice || t.e.Text == "" {
		return
	}
	t.state.Heard = t.e.Text
	select {
	case t.show <- struct{}{}:
	default:
	}
}

// voiceAttachment is the recording of a voice message; ok is false for
// any other message (an audio file without the flag is an attachment
// like any other).
func voiceAttachment(m discord.Message) (discord.Attachment, bool) {
	if m.Flags&voiceMessageFlag == 0 {
		return discord.Attachment{}, false
	}
	for _, a := range m.Attachments {
		if strings.HasPrefix(a.ContentType, "audio/") || strings.HasSuffix(strings.ToLower(a.Filename), ".ogg") {
			return a, true
		}
	}
	return discord.Attachment{}, false
}

// voiceMessage takes m if it is a voice message from an allowed user and
// reports whether it did. Its transcript becomes the prompt; the prompt is
// accepted into the intake only once transcribed (on its own goroutine,
// 🎙️ showing meanwhile), so what the inbox keeps is text, as typed.
func (b *Bot) voiceMessage(m discord.Message, member *discord.Member, log zerolog.Logger) bool {
	a, ok := voiceAttachment(m)
	if !ok {
		return false
	}
	v := b.opts.Voice
	if v.Transcriber == nil {
		log.Info().Msg("voice message not transcribed: TRANSCRIBE_URL is not set")
		go b.notice(m.ChannelID, m.ID, voiceOff)
		return true
	}
	if text := v.refusal(a); text != "" {
		log.Info().Uint64("bytes", a.Size).Msg("voice message refused by the size limits")
		go b.notice(m.ChannelID, m.ID, text)
		return true
	}
	go b.transcribeVoice(m, member, a, log)
	return true
}

// User-facing texts about voice messages.
const (
	voiceOff = "🎙️ I can't listen to voice messages here: transcription is not turned on. " +
		"Please type your message, or ask the gateway's operator to set TRANSCRIBE_URL (OpenAI's or a local Whisper server's endpoint)."
	voiceNoFiles = "🎙️ This gateway takes no attachments (MAX_ATTACHMENT_MB is 0), so it cannot listen to voice messages. Please type your message."
	voiceNotRead = "🎙️ I could not download this voice message from Discord, so nothing was run. Please send it again, or type your message."
	voiceStopped = "🎙️ The gateway stopped while transcribing this voice message, so nothing was run. Please send it again once the gateway is back."
	voiceEmpty   = "🎙️ I could not make out any words in this voice message, so nothing was run. Please record it again (closer to the microphone), or type your message."
)

// maxVoiceBytes is the largest recording taken: MAX_ATTACHMENT_MB, and
// the endpoint's 25 MB.
func (v VoiceOptions) maxVoiceBytes() int64 {
	if v.Fetcher == nil {
		return 0
	}
	return min(v.Fetcher.MaxFile, transcribe.MaxUpload)
}

// refusal is why a recording is not taken, before it is downloaded; ""
// when it may be.
func (v VoiceOptions) refusal(a discord.Attachment) string {
	limit := v.maxVoiceBytes()
	switch {
	case limit <= 0:
		return voiceNoFiles
	case int64(a.Size) > limit:
		return fmt.Sprintf("🎙️ This voice message is %s; I transcribe recordings up to %s. Please record a shorter one, or type your message.", megabytes(int64(a.Size)), megabytes(limit))
	}
	return ""
}

// tooLong says a recording is over MaxDuration.
func tooLong(d, limit time.Duration) string {
	return fmt.Sprintf("🎙️ This voice message is %s long; I transcribe up to %s. Please record a shorter one, or type your message.", card.Duration(d), card.Duration(limit))
}

func megabytes(n int64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.1f", float64(n)/(1<<20)), ".0") + " MB"
}

// transcribeVoice downloads and transcribes a voice message and takes its
// transcript as the prompt, or tells the user why not. The bot's context
// bounds it: a stop while it runs tells the user to send it again.
func (b *Bot) transcribeVoice(m discord.Message, member *discord.Member, a discord.Attachment, log zerolog.Logger) {
	if err := b.client(b.ctx).React(m.ChannelID, m.ID, transcribingEmoji); err != nil {
		log.Debug().Err(err).Msg("could not mark the voice message as being transcribed")
	}
	text, refusal := b.hear(b.ctx, a, log)
	// Its own context: a stop may have ended the bot's.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.client(ctx).Unreact(m.ChannelID, m.ID, transcribingEmoji); err != nil {
		log.Debug().Err(err).Msg("could not remove the transcribing mark")
	}
	if refusal != "" {
		b.voiceNotice(m, refusal, log)
		return
	}
	log.Info().Int("characters", len([]rune(text))).Msg("voice message transcribed")
	b.takeTranscript(m, member, text, log)
}

// hear returns a's transcript, or what to tell the user instead.
func (b *Bot) hear(ctx context.Context, a discord.Attachment, log zerolog.Logger) (string, string) {
	v := b.opts.Voice
	data, err := downloadVoice(ctx, v.Fetcher, string(a.URL), v.maxVoiceBytes())
	switch {
	case ctx.Err() != nil:
		return "", voiceStopped
	case errors.Is(err, errVoiceTooLarge):
		return "", v.refusal(discord.Attachment{Size: uint64(v.maxVoiceBytes() + 1)})
	case err != nil:
		log.Warn().Err(err).Msg("could not download a voice message")
		return "", voiceNotRead
	}
	if d, ok := transcribe.OggDuration(data); ok && v.MaxDuration > 0 && d > v.MaxDuration {
		log.Info().Int64("duration_ms", d.Milliseconds()).Msg("voice message over VOICE_MAX_SECONDS")
		return "", tooLong(d, v.MaxDuration)
	}
	name := files.SafeName(a.Filename)
	if name == "" {
		name = "voice-message.ogg"
	}
	audio := transcribe.Audio{Name: name, ContentType: a.ContentType, Data: data}
	text, tries, err := transcribeRetrying(ctx, b.clock, v, audio)
	if err != nil {
		if ctx.Err() != nil {
			return "", voiceStopped
		}
		log.Warn().Err(err).Int("tries", tries).Msg("voice message not transcribed")
		return "", transcriptionFailure(err, tries)
	}
	return text, ""
}

// errVoiceTooLarge is a recording whose download went past its limit
// (Discord said it was smaller).
var errVoiceTooLarge = errors.New("voice message over the size limit")

// downloadVoice fetches a recording as the attachments are fetched: only
// from the Fetcher's origins (redirects included, through its client),
// without credentials, at most limit bytes.
func downloadVoice(ctx context.Context, f *files.Fetcher, rawURL string, limit int64) ([]byte, error) {
	u, err := url.Parse(rawURL)
	if err != nil || !fromOrigins(u, f.Origins) {
		return nil, errors.New("voice message link not on Discord's servers")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("voice message request: %w", err)
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("download the voice message: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("download the voice message: HTTP %d", resp.StatusCode)
	}
	if resp.ContentLength > limit {
		return nil, errVoiceTooLarge
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fmt.Errorf("download the voice message: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, errVoiceTooLarge
	}
	return data, nil
}

// fromOrigins reports whether u is on one of origins (scheme://host[:port]),
// with no credentials in it: files.Fetcher's rule.
func fromOrigins(u *url.URL, origins []string) bool {
	if u == nil || u.User != nil {
		return false
	}
	origin := u.Scheme + "://" + u.Host
	for _, o := range origins {
		if strings.EqualFold(origin, o) {
			return true
		}
	}
	return false
}

// transcribeRetrying transcribes a, trying again after a failure on the
// endpoint's side (unreachable, 429, 5xx): the recording stays in memory,
// where re-recording it would cost the user. It returns how many tries
// were made.
func transcribeRetrying(ctx context.Context, clock clockwork.Clock, v VoiceOptions, a transcribe.Audio) (string, int, error) {
	retries, backoff := v.Retries, v.RetryBackoff
	if retries == 0 {
		retries = DefaultVoiceRetries
	}
	if backoff <= 0 {
		backoff = DefaultVoiceRetryBackoff
	}
	for try := 1; ; try++ {
		text, err := v.Transcriber.Transcribe(ctx, a)
		if err == nil || try > retries || !transient(err) {
			return text, try, err
		}
		select {
		case <-clock.After(backoff):
		case <-ctx.Done():
			return "", try, ctx.Err()
		}
		backoff *= 2
	}
}

// transient reports whether a transcription may succeed if tried again.
func transient(err error) bool {
	var se *transcribe.StatusError
	if errors.As(err, &se) {
		return se.Transient()
	}
	return errors.Is(err, transcribe.ErrUnreachable)
}

// transcriptionFailure says, for the user, why a transcription failed and
// what to do: nothing ran, and the message was not taken.
func transcriptionFailure(err error, tries int) string {
	const lead = "🎙️ I could not transcribe this voice message, so nothing was run: "
	tried := ""
	if tries > 1 {
		tried = fmt.Sprintf("; tried %d times", tries)
	}
	var se *transcribe.StatusError
	switch {
	case errors.Is(err, transcribe.ErrEmpty):
		return voiceEmpty
	case errors.Is(err, transcribe.ErrTooLarge):
		return lead + "the transcription service says the recording is too large. Please record a shorter one, or type your message."
	case errors.Is(err, transcribe.ErrUnreachable):
		return lead + "the transcription service could not be reached" + tried + ". Please send it again in a few minutes, or type your message."
	case errors.As(err, &se) && (se.Status == http.StatusUnauthorized || se.Status == http.StatusForbidden):
		return lead + "the transcription service refused the gateway's key. The gateway's operator needs to check TRANSCRIBE_API_KEY; please type your message meanwhile."
	case errors.As(err, &se) && se.Transient():
		return lead + fmt.Sprintf("the transcription service failed (it answered %d%s). Please send it again in a few minutes, or type your message.", se.Status, tried)
	case errors.As(err, &se) && se.Status == http.StatusOK:
		return lead + "the transcription service's answer had no transcript in it. The gateway's operator may need to check TRANSCRIBE_URL; please type your message meanwhile."
	case errors.As(err, &se):
		return lead + fmt.Sprintf("the transcription service could not read this recording (it answered %d). Please record it again, or type your message.", se.Status)
	}
	return lead + "something went wrong on the gateway's side. Please send it again, or type your message."
}

// voiceNotice tells the author of a voice message why it was not taken.
// It has a context of its own: a stop may have ended the bot's.
func (b *Bot) voiceNotice(m discord.Message, text string, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.post(ctx, m.ChannelID, m.ID, part{content: text}, b.noticeNonce(m.ID)); err != nil {
		log.Warn().Err(err).Int("length", len(text)).Msg("voice message notice not delivered")
	}
}

// takeTranscript is the intake of a transcribed voice message: the
// transcript is the prompt, as if the user had typed it, marked as heard
// so that its card quotes it (after a restart too, and on a worker).
func (b *Bot) takeTranscript(m discord.Message, member *discord.Member, transcript string, log zerolog.Logger) {
	e := messageEvent(m, member, transcript, nil)
	e.Voice = true
	b.submitMessage(e, m, log)
}
