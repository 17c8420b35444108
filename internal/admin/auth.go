package admin

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// CookieName is the login session's cookie.
const CookieName = "gateway_admin"

const (
	// sessionTTL is how long a login lasts.
	sessionTTL = 7 * 24 * time.Hour
	// maxSessions bounds the logins kept; the oldest goes first.
	maxSessions = 64
	// failPause is how long a client that gave a wrong token waits
	// before its next try is looked at: guessing stays slow, an operator
	// with a typo barely notices.
	failPause = time.Second
	// maxFailing bounds the clients remembered for failPause.
	maxFailing = 1024
)

// loginHTML is the login form; showLogin puts the message in place of
// messageSlot. (Not html/template: executing a template made the stripped
// binary 3.6 MB larger, since its reflection keeps methods the linker
// would otherwise drop.)
//
//go:embed login.html
var loginHTML string

const messageSlot = "<!--message-->"

// auth checks the admin token, as a bearer token or a login session.
type auth struct {
	// token is the SHA-256 of the admin token (equal lengths for the
	// constant-time comparison); nil when none is set: nothing is checked.
	token []byte
	clock clockwork.Clock
	log   zerolog.Logger

	mu sync.Mutex // guards sessions and failed
	// sessions are the login sessions' expiry times, by cookie value.
	sessions map[string]time.Time
	// failed is when each client (by IP) last gave a wrong token.
	failed map[string]time.Time
}

func newAuth(token string, clock clockwork.Clock, log zerolog.Logger) *auth {
	a := &auth{clock: clock, log: log, sessions: map[string]time.Time{}, failed: map[string]time.Time{}}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		a.token = sum[:]
	}
	return a
}

// valid reports whether given is the token, in constant time.
func (a *auth) valid(given string) bool {
	sum := sha256.Sum256([]byte(given))
	return subtle.ConstantTimeCompare(sum[:], a.token) == 1
}

// verdict is what auth makes of a request.
type verdict int

const (
	allowed verdict = iota
	denied
	// paused: the client gave a wrong token less than failPause ago.
	paused
)

// require wraps h in the token check.
func (a *auth) require(h http.Handler) http.Handler {
	if a.token == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch a.check(r) {
		case allowed:
			h.ServeHTTP(w, r)
		case paused:
			tooMany(w)
		default:
			a.unauthorized(w, r)
		}
	})
}

// check looks at a request's bearer token, else its session cookie.
func (a *auth) check(r *http.Request) verdict {
	if h := r.Header.Get("Authorization"); h != "" {
		token, ok := strings.CutPrefix(h, "Bearer ")
		if !ok {
			return denied
		}
		return a.try(r, token)
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		return denied
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if exp, ok := a.sessions[c.Value]; ok && now.Before(exp) {
		return allowed
	}
	return denied
}

// try checks a token a client gave, pausing clients that gave a wrong
// one a moment ago.
func (a *auth) try(r *http.Request, token string) verdict {
	ip := clientIP(r)
	now := a.clock.Now()
	a.mu.Lock()
	last, failedBefore := a.failed[ip]
	a.mu.Unlock()
	if failedBefore && now.Sub(last) < failPause {
		return paused
	}
	if a.valid(token) {
		return allowed
	}
	a.mu.Lock()
	for k, t := range a.failed {
		if now.Sub(t) >= failPause {
			delete(a.failed, k)
		}
	}
	if len(a.failed) < maxFailing {
		a.failed[ip] = now
	}
	a.mu.Unlock()
	a.log.Warn().Str("remote", ip).Str("path", r.URL.Path).Msg("admin server: wrong token")
	return denied
}

// startSession records a new login and returns its cookie value.
func (a *auth) startSession() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := base64.RawURLEncoding.EncodeToString(b[:])
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	oldest, oldestExp := "", time.Time{}
	for k, exp := range a.sessions {
		if !now.Before(exp) {
			delete(a.sessions, k)
			continue
		}
		if oldest == "" || exp.Before(oldestExp) {
			oldest, oldestExp = k, exp
		}
	}
	if len(a.sessions) >= maxSessions {
		delete(a.sessions, oldest)
	}
	a.sessions[id] = now.Add(sessionTTL)
	return id, nil
}

func (a *auth) endSession(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// unauthorized answers a request without a valid token: the login form
// for a browser asking for a page, JSON for the rest.
func (a *auth) unauthorized(w http.ResponseWriter, r *http.Request) {
	if (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		(r.URL.Path == "/" || strings.Contains(r.Header.Get("Accept"), "text/html")) {
		showLogin(w, http.StatusUnauthorized, "")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="gateway admin"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized: send the admin token as a bearer token, or log in at /login"})
}

func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too many wrong tokens: wait a second"})
}

// clientIP is the request's remote address without the port. Forwarded
// headers are not trusted: a proxy in front sees one client.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// showLogin writes the login form with a message ("" for none).
func showLogin(w http.ResponseWriter, status int, message string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	if message != "" {
		message = `<p role="alert">` + html.EscapeString(message) + `</p>`
	}
	io.WriteString(w, strings.Replace(loginHTML, messageSlot, message, 1))
}

func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	if s.auth.token == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	showLogin(w, http.StatusOK, "")
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.auth.token == nil {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	if fromAnotherSite(r) {
		showLogin(w, http.StatusForbidden, "This form was sent from another site. Open this page's own address, then log in.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	if err := r.ParseForm(); err != nil {
		showLogin(w, http.StatusBadRequest, "The form could not be read.")
		return
	}
	switch s.auth.try(r, r.PostForm.Get("token")) {
	case paused:
		w.Header().Set("Retry-After", "1")
		showLogin(w, http.StatusTooManyRequests, "Too many tries: wait a second, then try again.")
		return
	case denied:
		showLogin(w, http.StatusUnauthorized, "That is not the admin token.")
		return
	}
	id, err := s.auth.startSession()
	if err != nil {
		s.log.Error().Err(err).Msg("admin server: could not start a login session")
		http.Error(w, "could not start a session", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    id,
		Path:     "/",
		MaxAge:   int(sessionTTL / time.Second),
		HttpOnly: true,
		Secure:   s.overTLS(r),
		SameSite: http.SameSiteStrictMode,
	})
	s.log.Info().Str("remote", clientIP(r)).Msg("admin server: logged in")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if fromAnotherSite(r) {
		// Else any page could log the operator out: its response's
		// Set-Cookie would clear the cookie.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "refused: this form was sent from another site\n")
		return
	}
	if c, err := r.Cookie(CookieName); err == nil {
		s.auth.endSession(c.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: s.overTLS(r), SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// overTLS reports whether the browser reached the server over TLS: the
// request itself, or, with Options.TrustProxy, the proxy in front that
// says so in X-Forwarded-Proto. The login cookie is then Secure, so the
// browser never sends it over plain HTTP. (A client that forges the
// header only gets a cookie its browser will not send back over HTTP.)
func (s *Server) overTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if !s.opts.TrustProxy {
		return false
	}
	// A chain of proxies lists one value each; the first is the client's.
	first, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(first), "https")
}

// fromAnotherSite reports whether a browser says a page of another site
// sent r. Sec-Fetch-Site is set by every current browser and cannot be
// set by a page; Origin is the fallback for older ones. "Origin: null" is
// what the login page's own form sends (its Referrer-Policy is
// no-referrer), so it decides nothing. Without either header the request
// did not come from another site's page in a browser of the last years.
func fromAnotherSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return true
	}
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return false
	}
	u, err := url.Parse(o)
	return err != nil || !strings.EqualFold(u.Host, r.Host)
}
