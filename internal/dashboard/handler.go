package dashboard

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

// PromptExcerpt is how many runes of a running turn's prompt reach the
// page.
const PromptExcerpt = 280

// CSRFHeader and CSRFValue must be on every POST. A cross-site form cannot
// set a header, and a cross-site script that tries needs a CORS preflight
// the handler never grants.
const (
	CSRFHeader = "X-Requested-With"
	CSRFValue  = "dashboard"
)

// defaultKeepAlive is how often an idle event stream gets a comment, so
// that proxies and the browser do not take it for dead.
const defaultKeepAlive = 15 * time.Second

// Options configure Handler.
type Options struct {
	// Prefix is the path the handler is mounted at, e.g. "/" or
	// "/dashboard/"; the handler sees full paths (no http.StripPrefix).
	// Empty means "/".
	Prefix string
	// KeepAlive is how often an idle event stream gets a comment; zero
	// means 15 s.
	KeepAlive time.Duration
	// Now is the clock stamped on snapshots; nil means time.Now.
	Now func() time.Time
	// Log records what operators do from the page; the zero Logger
	// records nothing.
	Log zerolog.Logger
}

var (
	//go:embed page.html
	pageHTML string
	//go:embed page.js
	pageJS string
	//go:embed page.css
	pageCSS string

	// csp allows exactly the inline script and styles the page carries,
	// so that text which slipped into the markup could not run.
	csp = "default-src 'none'; " +
		"script-src " + hashSource(pageJS) + "; " +
		"style-src " + hashSource(pageCSS) + "; " +
		"connect-src 'self'; img-src 'self' data:; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

func hashSource(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

type handler struct {
	src       Source
	prefix    string
	keepAlive time.Duration
	now       func() time.Time
	log       zerolog.Logger
	page      []byte // rendered once: it depends only on prefix
}

// Handler serves the dashboard under opts.Prefix:
//
//	GET  {prefix}                              the page
//	GET  {prefix}events                        Server-Sent Events
//	POST {prefix}turns/{id}/stop               Source.Stop
//	POST {prefix}schedule/{kind}/{name}/run    Source.RunNow
//	POST {prefix}sessions/{channel}/reset      Source.ResetSession
//
// The POSTs answer JSON ({"ok":true} or {"error":"..."}) and are refused
// with 403 without the CSRFHeader or from another origin.
func Handler(src Source, opts Options) http.Handler {
	prefix := opts.Prefix
	if prefix == "" {
		prefix = "/"
	}
	if !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	h := &handler{src: src, prefix: prefix, keepAlive: opts.KeepAlive, now: opts.Now, log: opts.Log}
	if h.keepAlive <= 0 {
		h.keepAlive = defaultKeepAlive
	}
	if h.now == nil {
		h.now = time.Now
	}
	// Plain replacement, not html/template: the page, its script and
	// styles are ours and fixed, and the prefix is the operator's path,
	// escaped here; html/template would add 3.6 MB to the binary.
	h.page = []byte(strings.NewReplacer(
		"{{.Style}}", pageCSS,
		"{{.Script}}", pageJS,
		"{{.Base}}", html.EscapeString(prefix),
	).Replace(pageHTML))

	mux := http.NewServeMux()
	mux.HandleFunc("GET "+prefix+"{$}", h.servePage)
	mux.HandleFunc("GET "+prefix+"events", h.serveEvents)
	mux.HandleFunc("POST "+prefix+"turns/{id}/stop", h.sameOrigin(h.stop))
	mux.HandleFunc("POST "+prefix+"schedule/{kind}/{name}/run", h.sameOrigin(h.runNow))
	mux.HandleFunc("POST "+prefix+"sessions/{channel}/reset", h.sameOrigin(h.reset))
	return mux
}

func (h *handler) servePage(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	w.Write(h.page)
}

// serveEvents streams the state: a "snapshot" event, then one event per
// Update named by its kind, until the client goes or the Source ends the
// subscription.
func (h *handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	// The admin server's write timeout is for ordinary answers; this one
	// lasts as long as the page is open.
	_ = rc.SetWriteDeadline(time.Time{})

	ctx := r.Context()
	// Subscribe before the snapshot so that no change falls between them;
	// a change the snapshot already holds is applied twice, which the
	// page takes in its stride (turns are keyed by event id).
	updates := h.src.Subscribe(ctx)

	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)

	sse := &eventWriter{w: w, rc: rc}
	sse.raw("retry: 3000\n\n")
	if !sse.event("snapshot", h.snapshot()) {
		return
	}
	tick := time.NewTicker(h.keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !sse.raw(": keep-alive\n\n") {
				return
			}
		case u, ok := <-updates:
			if !ok {
				return
			}
			var sent bool
			if u.Resync {
				sent = sse.event("snapshot", h.snapshot())
			} else {
				sent = sse.event(u.Kind, clip(u).Payload)
			}
			if !sent {
				return
			}
		}
	}
}

// snapshot is the Source's state as the page gets it: stamped with the
// clock, prompts cut, and lists never null.
func (h *handler) snapshot() State {
	s := h.src.Snapshot()
	s.Now = h.now()
	running := make([]Turn, len(s.Running))
	for i, t := range s.Running {
		t.Prompt = excerpt(t.Prompt)
		running[i] = t
	}
	s.Running = running
	s.Queue = nonNil(s.Queue)
	s.Activity = nonNil(s.Activity)
	s.Schedule = nonNil(s.Schedule)
	s.Sessions = nonNil(s.Sessions)
	if s.Processes != nil {
		p := *s.Processes
		p.List = nonNil(p.List)
		s.Processes = &p
	}
	return s
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// clip cuts the prompt of a started turn, and makes a list of processes
// never null.
func clip(u Update) Update {
	switch p := u.Payload.(type) {
	case Turn:
		p.Prompt = excerpt(p.Prompt)
		u.Payload = p
	case Processes:
		p.List = nonNil(p.List)
		u.Payload = p
	}
	return u
}

func excerpt(s string) string {
	if utf8.RuneCountInString(s) <= PromptExcerpt {
		return s
	}
	r := []rune(s)
	return string(r[:PromptExcerpt-1]) + "…"
}

// eventWriter writes Server-Sent Events, flushing each.
type eventWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

// event writes one event and reports whether the client still listens.
func (e *eventWriter) event(name string, payload any) bool {
	data, err := json.Marshal(payload)
	if err != nil {
		// A payload that cannot be encoded is skipped, not the stream.
		data = []byte("null")
	}
	// Event names are the package's constants; keep any other one to a
	// single line so it cannot forge a field.
	name = strings.NewReplacer("\n", "", "\r", "").Replace(name)
	// encoding/json escapes newlines inside strings, so data is one line.
	return e.raw("event: " + name + "\ndata: " + string(data) + "\n\n")
}

func (e *eventWriter) raw(s string) bool {
	if _, err := io.WriteString(e.w, s); err != nil {
		return false
	}
	return e.rc.Flush() == nil
}

// sameOrigin refuses a request that a page of another origin could have
// made: it must carry CSRFHeader, and Origin and Sec-Fetch-Site, when the
// browser sends them, must not name another site.
func (h *handler) sameOrigin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(CSRFHeader) != CSRFValue {
			writeJSON(w, http.StatusForbidden, answer{Error: "missing " + CSRFHeader + " header"})
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
			writeJSON(w, http.StatusForbidden, answer{Error: "cross-origin request refused"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !strings.EqualFold(u.Host, r.Host) {
				writeJSON(w, http.StatusForbidden, answer{Error: "cross-origin request refused"})
				return
			}
		}
		next(w, r)
	}
}

func (h *handler) stop(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || id == 0 {
		writeJSON(w, http.StatusBadRequest, answer{Error: "bad event id"})
		return
	}
	h.log.Info().Uint64("event", id).Msg("dashboard: stop")
	h.act(w, h.src.Stop(id))
}

func (h *handler) runNow(w http.ResponseWriter, r *http.Request) {
	kind, name := r.PathValue("kind"), r.PathValue("name")
	if kind != ScheduleHeartbeat && kind != ScheduleCron {
		writeJSON(w, http.StatusBadRequest, answer{Error: "kind must be heartbeat or cron"})
		return
	}
	if name == "" {
		writeJSON(w, http.StatusBadRequest, answer{Error: "no name"})
		return
	}
	h.log.Info().Str("kind", kind).Str("name", name).Msg("dashboard: run now")
	h.act(w, h.src.RunNow(kind, name))
}

func (h *handler) reset(w http.ResponseWriter, r *http.Request) {
	ch := r.PathValue("channel")
	if ch == "" {
		writeJSON(w, http.StatusBadRequest, answer{Error: "no channel"})
		return
	}
	h.log.Info().Str("channel", ch).Msg("dashboard: reset session")
	h.act(w, h.src.ResetSession(ch))
}

// answer is the JSON body of a POST's response.
type answer struct {
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`
}

// act answers a POST with the outcome of the Source's action.
func (h *handler) act(w http.ResponseWriter, err error) {
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, answer{OK: true})
	case errors.Is(err, ErrNotFound):
		writeJSON(w, http.StatusNotFound, answer{Error: err.Error()})
	case errors.Is(err, ErrConflict):
		writeJSON(w, http.StatusConflict, answer{Error: err.Error()})
	default:
		h.log.Warn().Err(err).Msg("dashboard: action failed")
		writeJSON(w, http.StatusInternalServerError, answer{Error: err.Error()})
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
