package discord

import (
	"net/http"
	"strings"
	"testing"
)

func TestPermanentHandshake(t *testing.T) {
	for status, want := range map[int]bool{
		http.StatusNotFound: true, http.StatusBadRequest: true, http.StatusOK: true,
		http.StatusMovedPermanently: true, http.StatusUnauthorized: true, http.StatusForbidden: true,
		http.StatusRequestTimeout: false, http.StatusTooManyRequests: false,
		http.StatusInternalServerError: false, http.StatusBadGateway: false, http.StatusServiceUnavailable: false,
	} {
		if got := permanentHandshake(status); got != want {
			t.Errorf("permanentHandshake(%d) = %v, want %v", status, got, want)
		}
	}
}

func TestHandshakeErrorNamesTheSetting(t *testing.T) {
	custom := (&HandshakeError{Status: 404, Custom: true}).Error()
	for _, want := range []string{"HTTP 404 Not Found", "DISCORD_GATEWAY_URL", "wss://"} {
		if !strings.Contains(custom, want) {
			t.Errorf("%q lacks %q", custom, want)
		}
	}
	if own := (&HandshakeError{Status: 400}).Error(); strings.Contains(own, "DISCORD_GATEWAY_URL") {
		t.Errorf("Discord's own gateway failing blames the setting: %q", own)
	}
}
