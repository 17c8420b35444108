// Package transcribe turns a voice recording into text through an
// OpenAI-compatible speech-to-text endpoint (POST
// /v1/audio/transcriptions, multipart/form-data), which OpenAI and local
// Whisper servers (faster-whisper-server, whisper.cpp's server, LocalAI,
// vLLM) all serve.
//
// A Client holds no state between calls and is safe for concurrent use.
// Its errors never carry the API key: what the endpoint answers is logged
// by the caller, and a key the endpoint echoes back is cut out first.
package transcribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"
	"time"
)

// MaxUpload is the largest file OpenAI's endpoint takes (25 MB); local
// servers take it too.
const MaxUpload = 25 << 20

// DefaultTimeout bounds one transcription when the Client sets none.
const DefaultTimeout = 2 * time.Minute

// maxAnswer bounds the endpoint's answer the client reads: a transcript of
// the longest recording is far below it.
const maxAnswer = 1 << 20

// Sentinel errors, for callers that tell users what happened.
var (
	// ErrTooLarge is audio over MaxUpload (or the endpoint's 413).
	ErrTooLarge = errors.New("the audio is over the transcription endpoint's limit")
	// ErrEmpty is a transcript with no words in it.
	ErrEmpty = errors.New("the transcript is empty")
	// ErrUnreachable is a request that got no answer: the endpoint is
	// down, refused the connection, or did not answer in time.
	ErrUnreachable = errors.New("the transcription endpoint could not be reached")
	// ErrNoAudio is a call with no audio.
	ErrNoAudio = errors.New("no audio to transcribe")
)

// StatusError is an answer other than 200 from the endpoint.
type StatusError struct {
	Status int
	// Message is the endpoint's own explanation (its error.message, or
	// the start of its body), with the key cut out.
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("transcription endpoint answered %d", e.Status)
	}
	return fmt.Sprintf("transcription endpoint answered %d: %s", e.Status, e.Message)
}

// Transient reports whether the same request may succeed later: the
// endpoint was overloaded, rate-limited or failed on its side.
func (e *StatusError) Transient() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// Audio is one recording to transcribe.
type Audio struct {
	// Name is the file name sent with it; the endpoint reads the format
	// from its extension (voice-message.ogg).
	Name        string
	ContentType string
	Data        []byte
}

// Client calls one transcription endpoint.
type Client struct {
	// URL is the endpoint (see Endpoint).
	URL string
	// Key, if set, is sent as "Authorization: Bearer <Key>".
	Key string
	// Model is the model asked for (whisper-1 on OpenAI; a local server
	// may ignore it).
	Model string
	// HTTP sends the requests; nil is a client of its own.
	HTTP *http.Client
	// Timeout bounds one call; zero is DefaultTimeout.
	Timeout time.Duration
}

// New returns a Client for the endpoint at rawURL (see Endpoint).
func New(rawURL, key, model string) *Client {
	return &Client{URL: Endpoint(rawURL), Key: key, Model: model, HTTP: &http.Client{}}
}

// Endpoint completes a base URL to the transcription endpoint: a URL
// ending in /audio/transcriptions is used as it is, one ending in /v1
// gets /audio/transcriptions, any other gets /v1/audio/transcriptions
// (http://localhost:8000 is a local server's root).
func Endpoint(rawURL string) string {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return rawURL
	}
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/audio/transcriptions"):
	case strings.HasSuffix(p, "/v1"):
		p += "/audio/transcriptions"
	default:
		p += "/v1/audio/transcriptions"
	}
	u.Path = p
	return u.String()
}

// Transcribe sends a to the endpoint and returns its transcript, trimmed.
func (c *Client) Transcribe(ctx context.Context, a Audio) (string, error) {
	switch {
	case len(a.Data) == 0:
		return "", ErrNoAudio
	case len(a.Data) > MaxUpload:
		return "", ErrTooLarge
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, contentType, err := c.form(a)
	if err != nil {
		return "", fmt.Errorf("build the transcription request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, body)
	if err != nil {
		return "", fmt.Errorf("transcription request: %w", err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Accept", "application/json")
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return "", c.unreachable(ctx, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return "", c.unreachable(ctx, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", c.statusError(resp.StatusCode, answer)
	}
	text, err := transcript(answer)
	if err != nil {
		return "", err
	}
	if text == "" {
		return "", ErrEmpty
	}
	return text, nil
}

func (c *Client) client() *http.Client {
	if c.HTTP == nil {
		return http.DefaultClient
	}
	return c.HTTP
}

// form is the multipart body: the file, the model, and response_format
// json, which every compatible server answers with {"text": ...}.
func (c *Client) form(a Audio) (io.Reader, string, error) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	name := a.Name
	if name == "" {
		name = "voice-message.ogg"
	}
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="file"; filename=%q`, strings.NewReplacer("\r", "", "\n", "").Replace(name)))
	ct := a.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	part, err := w.CreatePart(h)
	if err != nil {
		return nil, "", err
	}
	if _, err := part.Write(a.Data); err != nil {
		return nil, "", err
	}
	model := c.Model
	if model == "" {
		model = "whisper-1"
	}
	if err := w.WriteField("model", model); err != nil {
		return nil, "", err
	}
	if err := w.WriteField("response_format", "json"); err != nil {
		return nil, "", err
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return &buf, w.FormDataContentType(), nil
}

// unreachable wraps a transport error: the caller's cancellation stays
// itself, anything else (refused, reset, timed out) is ErrUnreachable.
// The error's text names the host, never the key (it is only a header).
func (c *Client) unreachable(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return fmt.Errorf("transcribe: %w", err)
	}
	return fmt.Errorf("%w: %s", ErrUnreachable, c.scrub(err.Error()))
}

// statusError reads an error answer: OpenAI's {"error": {"message"}},
// a local server's {"detail": ...} or plain text.
func (c *Client) statusError(status int, body []byte) error {
	var msg string
	var shaped struct {
		Error  json.RawMessage `json:"error"`
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &shaped) == nil {
		var inner struct {
			Message string `json:"message"`
		}
		switch {
		case json.Unmarshal(shaped.Error, &inner) == nil && inner.Message != "":
			msg = inner.Message
		case json.Unmarshal(shaped.Error, &msg) == nil:
		case json.Unmarshal(shaped.Detail, &msg) == nil:
		}
	}
	if msg == "" && !json.Valid(body) {
		msg = string(body)
	}
	msg = c.scrub(oneLine(msg, 300))
	if status == http.StatusRequestEntityTooLarge {
		return fmt.Errorf("%w: %w", ErrTooLarge, &StatusError{Status: status, Message: msg})
	}
	return &StatusError{Status: status, Message: msg}
}

// transcript reads the text of a 200 answer: {"text": ...}, or plain
// text from a server that ignores response_format.
func transcript(body []byte) (string, error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var out struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(trimmed, &out); err != nil || out.Text == nil {
			return "", &StatusError{Status: http.StatusOK, Message: "the answer has no transcript"}
		}
		return strings.TrimSpace(*out.Text), nil
	}
	return strings.TrimSpace(string(trimmed)), nil
}

// scrub cuts the key out of text the endpoint or the transport wrote.
func (c *Client) scrub(s string) string {
	if c.Key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Key, "[key]")
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "")), " ")
	if r := []rune(s); len(r) > n {
		s = string(r[:n-1]) + "…"
	}
	return s
}
