package discord

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

func TestTokenShape(t *testing.T) {
	id, err := TokenShape(fakediscord.DefaultToken)
	if err != nil || id != 1234567890123456789 {
		t.Errorf("TokenShape(valid) = %d, %v", id, err)
	}
	for token, want := range map[string]string{
		"":                                   "empty",
		"Bot " + fakediscord.DefaultToken:    `"Bot "`,
		`"` + fakediscord.DefaultToken + `"`: "quotes",
		"abcdef0123456789abcdef0123456789":   "three",
		"!!!.abc.def":                        "base64",
		"aGVsbG8.abc.def":                    "user id",
	} {
		_, err := TokenShape(token)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TokenShape(%q) = %v, want an error about %s", token, err, want)
		}
	}
}

func TestCheckToken(t *testing.T) {
	fd := fakediscord.Start(t)
	name, err := CheckToken(context.Background(), Options{Token: fakediscord.DefaultToken, APIBaseURL: fd.APIBaseURL()})
	if err != nil || name != fakediscord.BotUsername {
		t.Errorf("CheckToken(good) = %q, %v", name, err)
	}
	// The rejection is told by its error, not by "401" (which a port can
	// hold); the token is one that no message holds by chance.
	bad := "rejected-" + rand.Text()
	_, err = CheckToken(context.Background(), Options{Token: bad, APIBaseURL: fd.APIBaseURL()})
	if !errors.Is(err, ErrTokenRejected) || strings.Contains(err.Error(), bad) {
		t.Errorf("CheckToken(bad) = %v, want the 401 explanation, without the token", err)
	}
}
