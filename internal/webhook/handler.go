package webhook

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/internal/queue"
	"github.com/agentgateway/gateway/internal/schedule"
)

// Defaults for Options.
const (
	DefaultMaxBody    = 256 << 10
	DefaultRetryAfter = 30 * time.Second
)

// Header names.
const (
	SignatureHeader = "X-Signature-256"
	signaturePrefix = "sha256="
	bearerPrefix    = "Bearer "
)

// Options configures a Handler.
type Options struct {
	// Lookup returns the webhook definition with this name
	// (schedule.Scheduler.Webhook), so reloads of agents.md apply.
	Lookup func(name string) (schedule.Webhook, bool)
	// Secret returns the value of the environment variable a webhook's
	// Secret-Env names (os.LookupEnv in production).
	Secret func(envName string) (string, bool)
	// Enqueue hands the event to the queue (queue.Queue.Enqueue).
	Enqueue func(queue.Event) (queue.Receipt, error)
	// DefaultChannel receives the reply of a webhook that names no
	// Channel (OUTPUT_CHANNEL_ID). Empty: such replies are only logged.
	DefaultChannel string
	// MaxBody is the largest accepted body in bytes; 0 means
	// DefaultMaxBody. A larger one is answered 413.
	MaxBody int64
	// RetryAfter is sent with 503 when the queue is full; 0 means
	// DefaultRetryAfter.
	RetryAfter time.Duration
	// Answered, if set, is told the status of every request answered
	// (the admin server's metrics).
	Answered func(status int)
	Log      zerolog.Logger
}

// Handler serves POST /hooks/{name}. Mount it at "/hooks/".
type Handler struct {
	opts Options
	log  zerolog.Logger
	mux  *http.ServeMux

	mu       sync.Mutex        // guards disabled
	disabled map[string]string // webhook -> why it was last logged as disabled
}

// New returns a Handler. Lookup, Secret and Enqueue are required.
func New(opts Options) (*Handler, error) {
	if opts.Lookup == nil || opts.Secret == nil || opts.Enqueue == nil {
		return nil, errors.New("webhook: Options.Lookup, Secret and Enqueue are required")
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = DefaultRetryAfter
	}
	h := &Handler{
		opts:     opts,
		log:      opts.Log.With().Str("component", "webhook").Logger(),
		mux:      http.NewServeMux(),
		disabled: map[string]string{},
	}
	h.mux.HandleFunc("/hooks/{name}", h.serveHook)
	return h, nil
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// response is what one request is answered with; it is logged after.
type response struct {
	status int
	msg    string // the body of an error response
	size   int64  // bytes of payload read
	event  uint64
	// duplicate marks a delivery accepted before (by its key).
	duplicate bool
}

func (h *Handler) serveHook(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	resp := h.handle(w, r, name)
	h.logRequest(r, name, resp)
	if h.opts.Answered != nil {
		h.opts.Answered(resp.status)
	}
	if resp.status == http.StatusAccepted {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(resp.status)
		_ = json.NewEncoder(w).Encode(struct {
			EventID   uint64 `json:"event_id,omitempty"`
			Duplicate bool   `json:"duplicate,omitempty"`
		}{resp.event, resp.duplicate})
		return
	}
	http.Error(w, resp.msg, resp.status)
}

// handle checks, authenticates and enqueues one request. It sets the
// response headers that go with an error (Allow, WWW-Authenticate,
// Retry-After) on w; the caller writes the status and body.
func (h *Handler) handle(w http.ResponseWriter, r *http.Request, name string) response {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return response{status: http.StatusMethodNotAllowed, msg: "method not allowed: use POST"}
	}
	def, ok := h.opts.Lookup(name)
	if !ok {
		return response{status: http.StatusNotFound, msg: "no such webhook"}
	}
	secret, ok := h.opts.Secret(def.SecretEnv)
	if problem := SecretProblem(def.SecretEnv, secret, ok); problem != "" {
		h.warnDisabled(def, problem)
		return response{status: http.StatusForbidden, msg: "webhook disabled by the gateway's configuration (its log says why)"}
	}
	h.forgetDisabled(def.Name)
	sig, bearer := r.Header.Get(SignatureHeader), r.Header.Get("Authorization")
	if sig == "" && bearer == "" {
		return unauthorized(w)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return response{status: http.StatusRequestEntityTooLarge, msg: fmt.Sprintf("body larger than %d bytes", h.opts.MaxBody), size: int64(len(body))}
	case err != nil:
		return response{status: http.StatusBadRequest, msg: "could not read the body", size: int64(len(body))}
	}
	signed := validSignature(sig, body, secret)
	if !signed && !validBearer(bearer, secret) {
		return unauthorized(w)
	}
	key := DeliveryKey(def.Name, r.Header, body)
	if signed {
		key = SignedDeliveryKey(def.Name, body)
	}
	payload := strings.ToValidUTF8(string(body), string(utf8.RuneError))
	receipt, err := h.opts.Enqueue(queue.Event{
		Kind:      queue.KindWebhook,
		Source:    "webhook",
		Name:      def.Name,
		ChannelID: cmp.Or(def.Channel, h.opts.DefaultChannel),
		Text:      Render(def.Instruction, payload),
		Key:       key,
	})
	var full *queue.FullError
	switch {
	case errors.Is(err, queue.ErrDuplicate):
		// A sender retrying a delivery that was accepted before (its 202
		// was lost): accepted, once.
		return response{status: http.StatusAccepted, size: int64(len(body)), duplicate: true}
	case errors.As(err, &full):
		w.Header().Set("Retry-After", strconv.Itoa(int(h.opts.RetryAfter.Round(time.Second)/time.Second)))
		return response{status: http.StatusServiceUnavailable, msg: "queue full: retry later", size: int64(len(body))}
	case errors.Is(err, queue.ErrClosed):
		return response{status: http.StatusServiceUnavailable, msg: "shutting down", size: int64(len(body))}
	case err != nil:
		return response{status: http.StatusInternalServerError, msg: "could not enqueue the event", size: int64(len(body))}
	}
	return response{status: http.StatusAccepted, size: int64(len(body)), event: receipt.Event.ID}
}

func unauthorized(w http.ResponseWriter) response {
	w.Header().Set("WWW-Authenticate", `Bearer realm="webhook"`)
	return response{status: http.StatusUnauthorized, msg: "unauthorized"}
}

// validSignature checks an "X-Signature-256: sha256=<hex>" header against
// the HMAC-SHA256 of body.
func validSignature(header string, body []byte, secret string) bool {
	hexSig, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// validBearer checks an "Authorization: Bearer <secret>" header in constant
// time (the lengths may leak; the content does not).
func validBearer(header, secret string) bool {
	token, ok := strings.CutPrefix(header, bearerPrefix)
	if !ok {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(token), []byte(secret)) == 1
}

// warnDisabled logs, once per webhook and reason until the secret meets the
// rules (SecretProblem), that it refuses every request.
func (h *Handler) warnDisabled(def schedule.Webhook, problem string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.disabled[def.Name] == problem {
		return
	}
	h.disabled[def.Name] = problem
	h.log.Warn().Str("webhook", def.Name).Str("why", problem).
		Msg("webhook disabled: every request is refused (403) until its secret meets the rules")
}

// forgetDisabled re-arms the warning once the secret meets the rules.
func (h *Handler) forgetDisabled(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.disabled, name)
}

// logRequest logs one request without its body or headers: they may carry
// the secret or private data.
func (h *Handler) logRequest(r *http.Request, name string, resp response) {
	var ev *zerolog.Event
	switch {
	case resp.status >= 500:
		ev = h.log.Error()
	case resp.status >= 400:
		ev = h.log.Warn()
	default:
		ev = h.log.Info()
	}
	if resp.event != 0 {
		ev = ev.Uint64("event", resp.event)
	}
	ev.Str("webhook", name).Int("status", resp.status).Int64("size", resp.size).
		Str("remote", r.RemoteAddr).Msg("webhook request")
}

// deliveryHeaders name a delivery in the senders that set one: the
// gateway's own convention, GitHub, and GitLab's idempotency key.
var deliveryHeaders = []string{"X-Delivery-Id", "X-GitHub-Delivery", "Idempotency-Key", "X-Gitlab-Event-UUID"}

// DeliveryKey is the de-duplication key of a webhook request authenticated
// with a bearer token: the delivery id its sender set, else a hash of the
// payload (so the same payload sent twice to the same webhook runs once;
// include something unique, such as a timestamp, to run it again). A
// signed request is keyed by SignedDeliveryKey instead.
func DeliveryKey(webhook string, h http.Header, body []byte) string {
	for _, name := range deliveryHeaders {
		if v := strings.TrimSpace(h.Get(name)); v != "" && len(v) <= 200 {
			return "webhook:" + webhook + ":id:" + v
		}
	}
	return SignedDeliveryKey(webhook, body)
}

// SignedDeliveryKey is the de-duplication key of a request whose signature
// was valid: a hash of the payload, whatever delivery id it carries. The
// delivery-id headers are not signed, so keying on them would let anyone
// who saw one signed delivery (a proxy's log, a request bin) run it again
// with a new id; the signed payload cannot be changed without the secret.
// The signature adds nothing to the hash: it is a function of the payload.
// The key is kept as long as the inbox keeps the event (INBOX_RETENTION,
// and at most INBOX_MAX_EVENTS finished ones), so a replay within that
// window runs nothing; a sender that means to run
// the same payload twice must make it differ (a timestamp, an id).
func SignedDeliveryKey(webhook string, body []byte) string {
	sum := sha256.Sum256(body)
	return "webhook:" + webhook + ":sha256:" + hex.EncodeToString(sum[:])
}
