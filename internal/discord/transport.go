package discord

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/utils/json"
)

// transport is the HTTP layer under arikawa's REST client. It does two
// things arikawa cannot be configured to do:
//
//   - It sends requests for Discord's API to a configured base URL (a REST
//     proxy, or the fake Discord in tests). arikawa's endpoints are package
//     globals, so the rewrite has to happen below it.
//   - It owns rate-limit retries. On a 429 Discord has not acted on the
//     request, so waiting for Retry-After and sending it again is always
//     safe. arikawa v3.6.0 parses Retry-After as an integer; Discord sends
//     fractions ("0.5"), the parse fails and arikawa resends at once, posting
//     duplicates. Here the wait is the JSON body's exact retry_after (or
//     the header parsed as a float), and arikawa's own retries are switched off
//     (Retries = 1) so this is the only place that repeats a request.
//
// 5xx answers are retried only for idempotent methods; a POST that failed
// with a 5xx may have been carried out, so it goes back to the caller, which
// retries message sends with an enforced nonce (see outbox).
type transport struct {
	base http.RoundTripper
	// from is Discord's API prefix as arikawa writes it; to replaces it.
	from, to *url.URL
	// attempts bounds the tries of one request, 429s included.
	attempts int
	// maxWait is the longest Retry-After honoured; longer waits return the
	// 429 to the caller instead of holding a worker for minutes.
	maxWait time.Duration
	// backoff is the wait before retrying a 5xx answer.
	backoff func(try int) time.Duration
	// observe, if set, is told each attempt's answer (Monitor.Request).
	observe func(method, route string, status int)
	// sleep waits between tries; tests record the waits instead.
	sleep func(ctx context.Context, d time.Duration) error
}

func newTransport(base http.RoundTripper, apiBaseURL string) (*transport, error) {
	if base == nil {
		// All REST calls go to one host. The default transport keeps two
		// idle connections per host, so a typing call, a reply and a
		// reaction at once close and redial connections all the time.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 8
		base = t
	}
	from, err := url.Parse(strings.TrimSuffix(api.BaseEndpoint+api.Path, "/"))
	if err != nil {
		return nil, err
	}
	t := &transport{
		base:     base,
		from:     from,
		attempts: 5,
		maxWait:  30 * time.Second,
		backoff:  func(try int) time.Duration { return time.Duration(250<<try) * time.Millisecond },
		sleep:    sleep,
	}
	if apiBaseURL != "" {
		to, err := url.Parse(strings.TrimSuffix(apiBaseURL, "/"))
		if err != nil || to.Scheme == "" || to.Host == "" {
			return nil, fmt.Errorf("invalid Discord API base URL %q", apiBaseURL)
		}
		t.to = to
	}
	return t, nil
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	route := ""
	if t.observe != nil {
		route = t.routeOf(req.URL.Path)
	}
	req = t.rewrite(req)
	body, err := bufferBody(req)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		r := req
		if body != nil {
			r = req.Clone(req.Context())
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err := t.base.RoundTrip(r)
		if t.observe != nil {
			status := 0
			if err == nil {
				status = resp.StatusCode
			}
			t.observe(req.Method, route, status)
		}
		if err != nil || try+1 >= t.attempts {
			return normalize(resp), err
		}
		var wait time.Duration
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			wait = retryAfter(resp)
			if wait > t.maxWait {
				return normalize(resp), nil
			}
		case resp.StatusCode >= 500 && idempotent(req.Method):
			wait = t.backoff(try)
		default:
			return normalize(resp), nil
		}
		drain(resp)
		if err := t.sleep(req.Context(), wait); err != nil {
			return nil, err
		}
	}
}

// rewrite points a request for Discord's API at the configured base URL.
func (t *transport) rewrite(req *http.Request) *http.Request {
	if t.to == nil || req.URL.Host != t.from.Host || !strings.HasPrefix(req.URL.Path, t.from.Path) {
		return req
	}
	rest := strings.TrimPrefix(req.URL.Path, t.from.Path)
	// arikawa joins some endpoints with a double slash (//oauth2/...).
	rest = "/" + strings.TrimLeft(rest, "/")
	u := *req.URL
	u.Scheme, u.Host = t.to.Scheme, t.to.Host
	u.Path = t.to.Path + rest
	u.RawPath = ""
	r := req.Clone(req.Context())
	r.URL = &u
	r.Host = ""
	return r
}

func bufferBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return b, nil
}

// retryAfter reads how long Discord asks to wait: the body's retry_after
// (exact, in seconds), else the Retry-After header (whole seconds from
// Discord, rounded up, possibly fractional from a proxy), else 1 s.
// Reading the header first would wait up to a second too long for each
// 429 of a burst.
func retryAfter(resp *http.Response) time.Duration {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if d, ok := retryAfterBody(b); ok {
		return d
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if d, ok := seconds(s); ok {
			return d
		}
	}
	return time.Second
}

// retryAfterBody reads the retry_after (seconds) of a 429's JSON body.
func retryAfterBody(body []byte) (time.Duration, bool) {
	var v struct {
		RetryAfter float64 `json:"retry_after"`
	}
	if json.Unmarshal(body, &v) != nil || v.RetryAfter <= 0 {
		return 0, false
	}
	return seconds(strconv.FormatFloat(v.RetryAfter, 'f', -1, 64))
}

// seconds parses a non-negative, finite number of seconds.
func seconds(s string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 24*3600 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// normalize rewrites a fractional Retry-After on a response handed to
// arikawa to whole seconds (rounded up), which its limiter can parse.
func normalize(resp *http.Response) *http.Response {
	if resp == nil {
		return nil
	}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if _, err := strconv.Atoi(s); err != nil {
			d, ok := seconds(s)
			if !ok {
				resp.Header.Del("Retry-After")
			} else {
				resp.Header.Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
			}
		}
	}
	return resp
}

func idempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete, http.MethodPatch:
		return true
	}
	return false
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
