package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

const testToken = "s3cret-admin-token-0123456789"

// testServer is a Server listening on a free loopback port.
type testServer struct {
	*Server
	url   string
	clock *clockwork.FakeClock
	logs  *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startServer(t *testing.T, opts Options) *testServer {
	t.Helper()
	ts := &testServer{clock: clockwork.NewFakeClock(), logs: &lockedBuffer{}}
	opts.Addr, opts.Clock = "127.0.0.1:0", ts.clock
	opts.Log = zerolog.New(zerolog.MultiLevelWriter(ts.logs, zerolog.NewTestWriter(t)))
	s, err := Listen(opts)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	ts.Server, ts.url = s, "http://"+s.Addr()
	return ts
}

// noRedirects is a client that shows redirects instead of following them.
func noRedirects(jar http.CookieJar) *http.Client {
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

type answer struct {
	status int
	ctype  string
	body   string
	header http.Header
}

func get(t *testing.T, c *http.Client, url string, header map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return do(t, c, req)
}

func do(t *testing.T, c *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(b), resp.Header}
}

func postLogin(t *testing.T, c *http.Client, base, token string) answer {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(t, c, req)
}

type fakeMetrics struct{}

func (fakeMetrics) WritePrometheus(w io.Writer) { io.WriteString(w, "gateway_up 1\n") }

func TestHealthzAnswersWithoutToken(t *testing.T) {
	s := startServer(t, Options{Token: testToken})
	a := get(t, http.DefaultClient, s.url+"/healthz", nil)
	if a.status != http.StatusOK || a.body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", a.status, a.body)
	}
}

func TestWithoutATokenNothingIsAsked(t *testing.T) {
	s := startServer(t, Options{Metrics: fakeMetrics{}})
	if a := get(t, http.DefaultClient, s.url+"/metrics", nil); a.status != http.StatusOK || a.body != "gateway_up 1\n" {
		t.Errorf("/metrics = %d %q", a.status, a.body)
	}
	if a := get(t, noRedirects(nil), s.url+"/login", nil); a.status != http.StatusSeeOther {
		t.Errorf("/login without a token = %d, want a redirect to /", a.status)
	}
}

func TestTokenChecks(t *testing.T) {
	s := startServer(t, Options{Token: testToken, Metrics: fakeMetrics{}})
	c := http.DefaultClient
	tests := []struct {
		name   string
		path   string
		header map[string]string
		status int
		ctype  string
	}{
		{"no token, API", "/metrics", nil, http.StatusUnauthorized, "application/json"},
		{"no token, readyz", "/readyz", nil, http.StatusUnauthorized, "application/json"},
		{"no token, the page", "/", nil, http.StatusUnauthorized, "text/html; charset=utf-8"},
		{"no token, a browser", "/metrics", map[string]string{"Accept": "text/html,application/xhtml+xml"}, http.StatusUnauthorized, "text/html; charset=utf-8"},
		{"not a bearer token", "/metrics", map[string]string{"Authorization": "Basic " + testToken}, http.StatusUnauthorized, "application/json"},
		{"wrong token", "/metrics", map[string]string{"Authorization": "Bearer nope"}, http.StatusUnauthorized, "application/json"},
		{"paused after a wrong token", "/metrics", map[string]string{"Authorization": "Bearer " + testToken}, http.StatusTooManyRequests, "application/json"},
	}
	for _, tt := range tests {
		a := get(t, c, s.url+tt.path, tt.header)
		if a.status != tt.status || a.ctype != tt.ctype {
			t.Errorf("%s: %d %s, want %d %s", tt.name, a.status, a.ctype, tt.status, tt.ctype)
		}
		if strings.Contains(a.body, testToken) {
			t.Errorf("%s: the answer shows the token", tt.name)
		}
	}
	// A second later the right token is taken.
	s.clock.Advance(failPause)
	a := get(t, c, s.url+"/metrics", map[string]string{"Authorization": "Bearer " + testToken})
	if a.status != http.StatusOK || a.body != "gateway_up 1\n" {
		t.Errorf("right token: %d %q", a.status, a.body)
	}
	// The right token is never paused.
	for range 3 {
		if a := get(t, c, s.url+"/metrics", map[string]string{"Authorization": "Bearer " + testToken}); a.status != http.StatusOK {
			t.Fatalf("right token again: %d", a.status)
		}
	}
	if logs := s.logs.String(); strings.Contains(logs, testToken) || !strings.Contains(logs, "wrong token") {
		t.Errorf("logs show the token, or not the failed try:\n%s", logs)
	}
}

func TestLoginSetsASessionCookie(t *testing.T) {
	s := startServer(t, Options{Token: testToken, Metrics: fakeMetrics{}})
	jar, _ := cookiejar.New(nil)
	c := noRedirects(jar)

	form := get(t, c, s.url+"/login", nil)
	if form.status != http.StatusOK || !strings.Contains(form.body, `name="token"`) || strings.Contains(form.body, "http") {
		t.Errorf("login form: %d, with a token field and no external assets?\n%s", form.status, form.body)
	}
	if csp := form.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("login form CSP = %q", csp)
	}

	wrong := postLogin(t, c, s.url, "not it")
	if wrong.status != http.StatusUnauthorized || !strings.Contains(wrong.body, "not the admin token") || strings.Contains(wrong.body, "not it") {
		t.Errorf("wrong token: %d\n%s", wrong.status, wrong.body)
	}
	if paused := postLogin(t, c, s.url, testToken); paused.status != http.StatusTooManyRequests {
		t.Errorf("a try right after a wrong one: %d, want 429", paused.status)
	}
	s.clock.Advance(failPause)

	req, _ := http.NewRequest(http.MethodPost, s.url+"/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("right token: %s to %q, want 303 to /", resp.Status, resp.Header.Get("Location"))
	}
	cookies := resp.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v, want one", cookies)
	}
	ck := cookies[0]
	if ck.Name != CookieName || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Value == testToken || len(ck.Value) < 40 {
		t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, not Secure over plain HTTP, a random value", ck)
	}

	// The cookie opens every path.
	for _, path := range []string{"/metrics", "/readyz", "/"} {
		if a := get(t, c, s.url+path, nil); a.status != http.StatusOK {
			t.Errorf("%s with the cookie: %d", path, a.status)
		}
	}
	// A made-up session does not.
	other, _ := cookiejar.New(nil)
	u, _ := url.Parse(s.url)
	other.SetCookies(u, []*http.Cookie{{Name: CookieName, Value: strings.Repeat("A", 43)}})
	if a := get(t, noRedirects(other), s.url+"/metrics", nil); a.status != http.StatusUnauthorized {
		t.Errorf("a made-up session: %d", a.status)
	}
	// A session ends after its time.
	s.clock.Advance(sessionTTL)
	if a := get(t, c, s.url+"/metrics", nil); a.status != http.StatusUnauthorized {
		t.Errorf("an expired session: %d", a.status)
	}
}

func TestLogoutEndsTheSession(t *testing.T) {
	s := startServer(t, Options{Token: testToken, Metrics: fakeMetrics{}})
	jar, _ := cookiejar.New(nil)
	c := noRedirects(jar)
	if a := postLogin(t, c, s.url, testToken); a.status != http.StatusSeeOther {
		t.Fatalf("login: %d", a.status)
	}
	u, _ := url.Parse(s.url)
	session := jar.Cookies(u)
	req, _ := http.NewRequest(http.MethodPost, s.url+"/logout", nil)
	if a := do(t, c, req); a.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", a.status)
	}
	// The old cookie, sent again, no longer opens anything.
	again, _ := cookiejar.New(nil)
	again.SetCookies(u, session)
	if a := get(t, noRedirects(again), s.url+"/metrics", nil); a.status != http.StatusUnauthorized {
		t.Errorf("the session after logout: %d", a.status)
	}
}

func TestCookieIsSecureOverTLS(t *testing.T) {
	// The TLS server listens on a port of its own: name it in Hosts.
	s, err := Listen(Options{Addr: "127.0.0.1:0", Token: testToken, Hosts: []string{"127.0.0.1"}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.srv.Handler)
	ts.StartTLS()
	defer ts.Close()
	defer s.ln.Close()
	c := ts.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	req, _ := http.NewRequest(http.MethodPost, ts.URL+"/login", strings.NewReader("token="+url.QueryEscape(testToken)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ck := resp.Cookies(); len(ck) != 1 || !ck[0].Secure {
		t.Errorf("cookies over TLS %+v, want one Secure", ck)
	}
}

func TestReadyzFollowsReady(t *testing.T) {
	var problem atomic.Pointer[error]
	s := startServer(t, Options{Ready: func() error {
		if p := problem.Load(); p != nil {
			return *p
		}
		return nil
	}})
	read := func() (int, readiness) {
		a := get(t, http.DefaultClient, s.url+"/readyz", nil)
		var r readiness
		if err := json.Unmarshal([]byte(a.body), &r); err != nil {
			t.Fatalf("/readyz body %q: %v", a.body, err)
		}
		return a.status, r
	}
	if status, r := read(); status != http.StatusOK || !r.Ready {
		t.Errorf("ready: %d %+v", status, r)
	}
	down := errors.New("not connected to Discord")
	problem.Store(&down)
	status, r := read()
	if diff := cmp.Diff(readiness{Ready: false, Reason: "not connected to Discord"}, r); status != http.StatusServiceUnavailable || diff != "" {
		t.Errorf("not ready: %d (-want +got):\n%s", status, diff)
	}
	problem.Store(nil)
	if status, r := read(); status != http.StatusOK || !r.Ready {
		t.Errorf("ready again: %d %+v", status, r)
	}
}

func TestHandleMountsBehindTheToken(t *testing.T) {
	s := startServer(t, Options{Token: testToken})
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "page "+r.URL.Path) })
	bearer := map[string]string{"Authorization": "Bearer " + testToken}
	if a := get(t, http.DefaultClient, s.url+"/", bearer); a.status != http.StatusOK || !strings.Contains(a.body, "/metrics") {
		t.Errorf("/ before anything is mounted: %d %q", a.status, a.body)
	}
	if a := get(t, http.DefaultClient, s.url+"/nothing", bearer); a.status != http.StatusNotFound {
		t.Errorf("an unknown path: %d", a.status)
	}
	s.Handle("/", hello)
	s.Handle("GET /api/x", hello)
	for path, want := range map[string]string{"/": "page /", "/events": "page /events", "/api/x": "page /api/x"} {
		if a := get(t, http.DefaultClient, s.url+path, nil); a.status != http.StatusUnauthorized {
			t.Errorf("%s without the token: %d", path, a.status)
		}
		if a := get(t, http.DefaultClient, s.url+path, bearer); a.status != http.StatusOK || a.body != want {
			t.Errorf("%s with the token: %d %q, want %q", path, a.status, a.body, want)
		}
	}
	if a := get(t, http.DefaultClient, s.url+"/healthz", nil); a.status != http.StatusOK {
		t.Errorf("/healthz after mounting /: %d", a.status)
	}
}

func TestCloseWaitsForRequestsInFlight(t *testing.T) {
	s, err := Listen(Options{Addr: "127.0.0.1:0", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	s.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	}))
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	type result struct {
		body string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := http.Get("http://" + s.Addr() + "/slow")
		if err != nil {
			got <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- result{string(b), err}
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- s.Close(context.Background()) }()
	// Close stops listening first, then waits for the request.
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server still listens after Close")
		}
		runtime.Gosched()
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) with a request in flight", err)
	default:
	}
	close(release)
	if r := <-got; r.err != nil || r.body != "done" {
		t.Errorf("the request in flight: %q, %v", r.body, r.err)
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
}

// The login and logout forms are refused when a page of another site sent
// them: a browser says so in Sec-Fetch-Site, or in Origin. The login form
// itself, sent with Referrer-Policy: no-referrer, arrives with "Origin:
// null" and Sec-Fetch-Site: same-origin, and is taken.
func TestLoginFormsRefuseOtherSites(t *testing.T) {
	s := startServer(t, Options{Token: testToken})
	tests := []struct {
		name   string
		path   string
		header map[string]string
		status int
	}{
		{"logout from another site", "/logout", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"logout from a sibling site", "/logout", map[string]string{"Sec-Fetch-Site": "same-site"}, http.StatusForbidden},
		{"logout from another origin", "/logout", map[string]string{"Origin": "https://evil.example"}, http.StatusForbidden},
		{"login from another site", "/login", map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "null"}, http.StatusForbidden},
		{"login from another origin", "/login", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"logout from the page", "/logout", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "null"}, http.StatusSeeOther},
		{"logout, same origin", "/logout", map[string]string{"Origin": s.url}, http.StatusSeeOther},
		{"logout by a script", "/logout", nil, http.StatusSeeOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.clock.Advance(failPause)
			req, _ := http.NewRequest(http.MethodPost, s.url+tt.path, strings.NewReader(url.Values{"token": {"not it"}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			a := do(t, noRedirects(nil), req)
			if a.status != tt.status {
				t.Errorf("status %d, want %d (%q)", a.status, tt.status, a.body)
			}
			if tt.status == http.StatusForbidden && a.header.Get("Set-Cookie") != "" {
				t.Errorf("a refused form set a cookie: %q", a.header.Get("Set-Cookie"))
			}
		})
	}
	// A login from the page itself still works.
	s.clock.Advance(failPause)
	req, _ := http.NewRequest(http.MethodPost, s.url+"/login", strings.NewReader(url.Values{"token": {testToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Origin", "null")
	if a := do(t, noRedirects(nil), req); a.status != http.StatusSeeOther {
		t.Errorf("login from the form: %d (%q)", a.status, a.body)
	}
}

// Behind a TLS proxy the login cookie is Secure when the operator says the
// proxy is trusted (ADMIN_TRUST_PROXY) and it says the request came over
// HTTPS; without that trust the header is ignored.
func TestCookieIsSecureBehindATrustedProxy(t *testing.T) {
	tests := []struct {
		name   string
		trust  bool
		proto  string
		secure bool
	}{
		{"trusted proxy, https", true, "https", true},
		{"trusted proxy, HTTPS", true, "HTTPS", true},
		{"trusted proxy, a chain", true, "https, http", true},
		{"trusted proxy, http", true, "http", false},
		{"trusted proxy, no header", true, "", false},
		{"untrusted, https", false, "https", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, Options{Token: testToken, TrustProxy: tt.trust})
			for _, path := range []string{"/login", "/logout"} {
				body := ""
				if path == "/login" {
					body = url.Values{"token": {testToken}}.Encode()
				}
				req, _ := http.NewRequest(http.MethodPost, s.url+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if tt.proto != "" {
					req.Header.Set("X-Forwarded-Proto", tt.proto)
				}
				resp, err := noRedirects(nil).Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				ck := resp.Cookies()
				if len(ck) != 1 || ck[0].Secure != tt.secure {
					t.Errorf("%s: cookies %+v, want one with Secure=%v", path, ck, tt.secure)
				}
			}
		})
	}
}
