package discord

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/diamondburned/arikawa/v3/api"
	"github.com/diamondburned/arikawa/v3/utils/httputil"
	"github.com/diamondburned/arikawa/v3/utils/httputil/httpdriver"
)

// TokenShape checks that token looks like a bot token (three dot-separated
// base64url parts, the first encoding the bot's user id) without asking
// Discord, and returns that id. It catches the usual copy mistakes: a
// "Bot " prefix, quotes, the client secret or the public key instead.
func TokenShape(token string) (botID uint64, err error) {
	switch {
	case token == "":
		return 0, errors.New("empty")
	case strings.HasPrefix(token, "Bot "):
		return 0, errors.New(`starts with "Bot ": set the token alone, the gateway adds the prefix`)
	case strings.ContainsAny(token, "\"' \t\n"):
		return 0, errors.New("contains quotes or spaces: set the token alone")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return 0, errors.New("is not three dot-separated parts: this is not a bot token (the client secret and the public key are not tokens)")
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	if err != nil {
		raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(parts[0], "="))
	}
	if err != nil {
		return 0, errors.New("its first part is not base64: this is not a bot token")
	}
	id, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, errors.New("its first part is not a user id: this is not a bot token")
	}
	return id, nil
}

// ErrTokenRejected is CheckToken's error when Discord answers 401.
var ErrTokenRejected = errors.New("Discord rejected the token (401): reset it in the Developer Portal (Bot > Reset Token)")

// CheckToken asks Discord's REST API (through opts.APIBaseURL when set)
// who the token belongs to, and returns the bot's username.
func CheckToken(ctx context.Context, opts Options) (string, error) {
	rt, err := newTransport(opts.Transport, opts.APIBaseURL)
	if err != nil {
		return "", err
	}
	rt.attempts = 2
	c := api.NewClient("Bot " + opts.Token).WithContext(ctx)
	c.Client.Client = httpdriver.WrapClient(http.Client{Transport: rt, Timeout: 15 * time.Second})
	c.Client.Retries = 1
	me, err := c.Me()
	if err != nil {
		var herr *httputil.HTTPError
		if errors.As(err, &herr) && herr.Status == http.StatusUnauthorized {
			return "", ErrTokenRejected
		}
		if u := restUnreachable(err, opts.APIBaseURL); u != nil {
			return "", fmt.Errorf("ask Discord who the token belongs to: %w", u)
		}
		return "", fmt.Errorf("ask Discord who the token belongs to: %w", err)
	}
	if !me.Bot {
		return me.Username, fmt.Errorf("the token belongs to %s, which is not a bot account", me.Username)
	}
	return me.Username, nil
}
