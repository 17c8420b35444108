package discord

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/gorilla/websocket"
	"github.com/rs/zerolog"
)

// closedAddr is an address on 127.0.0.1 that refuses connections: a port
// just listened on and closed again.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestOpenCannotReachDiscord opens a bot whose gateway cannot be resolved
// or refuses connections. arikawa dials at most once per 5 s, so a limit
// of 6 s makes two attempts: the first is logged as a warning that says
// why, the second is not, the error names the cause, and nothing is logged
// once Open has returned.
func TestOpenCannotReachDiscord(t *testing.T) {
	var tag [4]byte
	rand.Read(tag[:])
	mark := "mark-" + hex.EncodeToString(tag[:])
	refused := closedAddr(t)
	token := "TOKEN-" + mark
	tests := []struct {
		name, gateway string
		// want are in the error and the warning.
		want []string
	}{
		{"dns", "ws://gateway." + mark + ".invalid/", []string{"gateway." + mark + ".invalid", "cannot be resolved", "DNS"}},
		{"refused", "ws://" + refused + "/", []string{refused, "refused the connection"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			logs := &logBuffer{}
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("bot log:\n%s", logs.String())
				}
			})
			// The API base URL refuses too: nothing may reach Discord.
			b, err := New(Options{Token: token, GatewayURL: tt.gateway, APIBaseURL: "http://" + refused, FastReconnect: true},
				zerolog.New(logs))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			defer cancel()
			err = b.Open(ctx, &testIntake{}, noSessions{})
			returned := logs.String()
			b.Close()
			if err == nil {
				t.Fatal("Open connected to an unreachable gateway")
			}
			msg := err.Error()
			for _, want := range tt.want {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q lacks %q", msg, want)
				}
			}
			if strings.Contains(msg, "finalize") || strings.Contains(msg, "websocket is closed") {
				t.Errorf("error %q hides the cause behind arikawa's close", msg)
			}
			if strings.Contains(msg, token) || strings.Contains(logs.String(), token) {
				t.Errorf("the token reached the error %q or the log", msg)
			}
			// Two attempts were made, so the single warning is not by luck.
			m := regexp.MustCompile(`(\d+) attempts`).FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("error %q does not count the attempts", msg)
			}
			if n, _ := strconv.Atoi(m[1]); n < 2 {
				t.Fatalf("%d attempts in 6 s, want at least 2 (arikawa dials every 5 s)", n)
			}
			warns := logs.lines(`"level":"warn"`)
			if len(warns) != 1 {
				t.Fatalf("%d warnings before giving up, want 1:\n%s", len(warns), strings.Join(warns, "\n"))
			}
			for _, want := range append(tt.want, "cannot reach Discord", "retrying for up to 6s") {
				if !strings.Contains(warns[0], want) {
					t.Errorf("warning %s lacks %q", warns[0], want)
				}
			}
			t.Logf("warning: %s\nerror: %s", warns[0], msg)
			if got := logs.String(); got != returned {
				t.Errorf("logged after Open gave up:\n%s", strings.TrimPrefix(got, returned))
			}
		})
	}
}

func TestUnreachableCause(t *testing.T) {
	dial := func(err error) error {
		return fmt.Errorf("failed to dial WS: %w", &net.OpError{Op: "dial", Net: "tcp", Err: err})
	}
	tests := []struct {
		name string
		err  error
		// want is the error's text for Discord's own gateway; "" when err
		// is not a network failure.
		want string
	}{
		{"no such host", dial(&net.DNSError{Err: "no such host", Name: "gateway.discord.gg", IsNotFound: true}),
			"Discord's gateway host gateway.discord.gg cannot be resolved (DNS: no such host): check DNS and the network (3 attempts in 60s)"},
		{"name server silent", dial(&net.DNSError{Err: "i/o timeout", Name: "gateway.discord.gg", IsTimeout: true}),
			"Discord's gateway host gateway.discord.gg cannot be resolved (DNS: no answer from the name server): check DNS and the network (3 attempts in 60s)"},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)),
			"Discord's gateway host gateway.discord.gg refused the connection: check the network, and a firewall or proxy in between (3 attempts in 60s)"},
		{"reset", dial(os.NewSyscallError("read", syscall.ECONNRESET)),
			"Discord's gateway host gateway.discord.gg reset the connection: check the network, and a firewall or proxy in between (3 attempts in 60s)"},
		{"no route", dial(os.NewSyscallError("connect", syscall.ENETUNREACH)),
			"Discord's gateway host gateway.discord.gg cannot be reached (no route to it): check the network, and a firewall or proxy in between (3 attempts in 60s)"},
		{"timeout", dial(os.ErrDeadlineExceeded),
			"Discord's gateway host gateway.discord.gg did not answer in time: check the network, and a firewall or proxy in between (3 attempts in 60s)"},
		{"certificate", fmt.Errorf("failed to dial WS: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}),
			"Discord's gateway host gateway.discord.gg failed the TLS handshake (x509: certificate signed by unknown authority): check the system's CA certificates and clock, or a proxy that intercepts TLS (3 attempts in 60s)"},
		{"bad handshake", fmt.Errorf("failed to dial WS: %w", websocket.ErrBadHandshake), ""},
		{"canceled", fmt.Errorf("failed to dial WS: %w", &net.OpError{Op: "dial", Net: "tcp", Err: context.Canceled}), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, ok := unreachableCause(tt.err)
			if ok != (tt.want != "") {
				t.Fatalf("unreachableCause(%q) ok = %v, want %v", tt.err, ok, tt.want != "")
			}
			if !ok {
				return
			}
			got := (&UnreachableError{Host: "gateway.discord.gg", Attempts: 3, Waited: 59990 * time.Millisecond, Err: tt.err}).Error()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Error() (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRESTCannotReachDiscord: the REST calls made at start (the token
// check of `gateway doctor`, a worker's Attach) name the cause too.
func TestRESTCannotReachDiscord(t *testing.T) {
	refused := closedAddr(t)
	var tag [4]byte
	rand.Read(tag[:])
	unresolved := "api.mark-" + hex.EncodeToString(tag[:]) + ".invalid"
	tests := []struct {
		name, base, want string
	}{
		{"dns", "http://" + unresolved + "/api/v9", "the API host " + unresolved + " (DISCORD_API_BASE_URL) cannot be resolved (DNS: no such host)"},
		{"refused", "http://" + refused + "/api/v9", "the API host " + refused + " (DISCORD_API_BASE_URL) refused the connection"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), waitLong)
			defer cancel()
			opts := Options{Token: "TOKEN-" + hex.EncodeToString(tag[:]), APIBaseURL: tt.base}
			_, err := CheckToken(ctx, opts)
			b, nerr := New(opts, zerolog.New(zerolog.NewTestWriter(t)))
			if nerr != nil {
				t.Fatal(nerr)
			}
			defer b.Close()
			aerr := b.Attach(ctx, &testIntake{}, noSessions{})
			for what, err := range map[string]error{"CheckToken": err, "Attach": aerr} {
				var u *UnreachableError
				if !errors.As(err, &u) {
					t.Errorf("%s: %v, not an UnreachableError", what, err)
					continue
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("%s: %q lacks %q", what, err, tt.want)
				}
				if strings.Contains(err.Error(), opts.Token) {
					t.Errorf("%s: %q carries the token", what, err)
				}
			}
		})
	}
}
