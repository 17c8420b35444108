// Package admin is the operator's HTTP server (ADMIN_ADDR): health and
// readiness for an orchestrator, Prometheus metrics, and the event hub a
// live dashboard subscribes to.
//
// GET /healthz answers 200 while the process serves. Every other path
// answers only requests whose Host names the server's own address or a
// name in Options.Hosts (421 otherwise), so that a page that re-resolves
// its own name to the server (DNS rebinding) reads and does nothing. Every
// other path also needs the admin token when one is set (ADMIN_TOKEN;
// required on anything but loopback, and with AGENT_USER): as
// "Authorization: Bearer <token>", or once through the login form
// (/login), which sets an HttpOnly, SameSite=Strict cookie holding a
// random session; the login and logout forms refuse what another site
// sent. Tokens are compared in constant time
// and never logged or shown. GET /readyz answers 200 only when the
// gateway can take and run events (Options.Ready); GET /metrics writes
// the Prometheus text format. More handlers (the dashboard) are mounted
// with Handle behind the same check.
//
// What the gateway reports reaches the metrics and the hub through one
// Monitor. A Server, a Monitor and a Hub are safe for concurrent use.
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// Options configures a Server.
type Options struct {
	// Addr is host:port to listen on (config.Config.AdminAddr); port 0
	// picks a free one (see Addr).
	Addr string
	// Token, if set, is required on every path but /healthz.
	Token string
	// Hosts are more names the server answers to (ADMIN_HOSTS): "host"
	// on any port or "host:port". Its own address always is.
	Hosts []string
	// TrustProxy says a proxy in front sets X-Forwarded-Proto
	// (ADMIN_TRUST_PROXY): "https" there makes the login cookie Secure.
	TrustProxy bool
	// Ready returns nil when the gateway can take and run events, else
	// why not; the reason is shown by /readyz, so it must hold no secret.
	// Nil: always ready.
	Ready func() error
	// Metrics writes /metrics; nil answers 404.
	Metrics interface{ WritePrometheus(w io.Writer) }
	// Clock drives login sessions and the failed-login limit; nil is the
	// real clock.
	Clock clockwork.Clock
	Log   zerolog.Logger
}

// Server is the admin HTTP server.
type Server struct {
	opts Options
	ln   net.Listener
	srv  *http.Server
	mux  *http.ServeMux
	auth *auth
	log  zerolog.Logger
	// root serves "/" and every path nothing else claims, once mounted
	// (the dashboard); until then "/" is a placeholder.
	root atomic.Pointer[http.Handler]
}

// Listen binds opts.Addr, so that a port in use fails the start at once;
// Serve answers requests.
func Listen(opts Options) (*Server, error) {
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("admin server (ADMIN_ADDR=%s): %w", opts.Addr, err)
	}
	hosts, err := newHostPolicy(opts.Addr, ln.Addr(), opts.Hosts)
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &Server{
		opts: opts,
		ln:   ln,
		mux:  http.NewServeMux(),
		auth: newAuth(opts.Token, opts.Clock, opts.Log),
		log:  opts.Log,
	}
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /readyz", s.auth.require(http.HandlerFunc(s.readyz)))
	s.mux.Handle("GET /metrics", s.auth.require(http.HandlerFunc(s.metrics)))
	s.mux.HandleFunc("GET /login", s.loginForm)
	s.mux.HandleFunc("POST /login", s.login)
	s.mux.HandleFunc("POST /logout", s.logout)
	s.mux.Handle("/", s.auth.require(http.HandlerFunc(s.serveRoot)))
	s.srv = &http.Server{
		Handler:           hosts.checkHost(s.mux, s),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		// No WriteTimeout: the dashboard's event stream stays open.
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Handle mounts h at pattern (http.ServeMux's syntax) behind the token
// check. "/" is the dashboard's place: h then gets every path no other
// pattern matches.
func (s *Server) Handle(pattern string, h http.Handler) {
	if pattern == "/" {
		s.root.Store(&h)
		return
	}
	s.mux.Handle(pattern, s.auth.require(h))
}

// serveRoot serves what Handle mounted at "/", or a placeholder.
func (s *Server) serveRoot(w http.ResponseWriter, r *http.Request) {
	if h := s.root.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path != "/" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "gateway admin server: /healthz, /readyz, /metrics\n")
}

// Serve answers requests until Close; it returns nil then.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("admin server: %w", err)
	}
	return nil
}

// Close stops taking requests and waits, bounded by ctx, for those in
// flight; streams still open when ctx ends are cut.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = errors.Join(err, s.srv.Close())
	}
	return err
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	io.WriteString(w, "ok\n")
}

// readiness is /readyz's answer.
type readiness struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	answer, status := readiness{Ready: true}, http.StatusOK
	if s.opts.Ready != nil {
		if err := s.opts.Ready(); err != nil {
			answer, status = readiness{Reason: err.Error()}, http.StatusServiceUnavailable
		}
	}
	writeJSON(w, status, answer)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.opts.Metrics == nil {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	s.opts.Metrics.WritePrometheus(w)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
