package kvstate

import (
	"regexp"
	"strings"
	"testing"
)

// validToken is one token of a JetStream KV key (nats.go's validKeyRe,
// without the '.' that separates tokens).
var validToken = regexp.MustCompile(`^[-/_=a-zA-Z0-9]+$`)

var keyCases = []struct{ key, token string }{
	{"123456789012345678", "123456789012345678"},
	{"chat-main_1", "chat-main_1"},
	{"", "="},
	{"thread:42", "=dGhyZWFkOjQy"},
	{"a.b", "=YS5i"},
	{"cron job/x*>", "=Y3JvbiBqb2IveCo-"},
	{"=abc", "=PWFiYw"},
	{"été", "=w6l0w6k"},
}

func TestEncodeKey(t *testing.T) {
	for _, tt := range keyCases {
		got := EncodeKey(tt.key)
		if got != tt.token {
			t.Errorf("EncodeKey(%q) = %q, want %q", tt.key, got, tt.token)
		}
		back, err := DecodeKey(got)
		if err != nil || back != tt.key {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q", got, back, err, tt.key)
		}
	}
}

func TestDecodeKeyRefuses(t *testing.T) {
	for _, token := range []string{"", "a.b", "a b", "=!!", "=YWJj" /* "abc", a plain key */, "=YWJ", "*", ">"} {
		if got, err := DecodeKey(token); err == nil {
			t.Errorf("DecodeKey(%q) = %q, want an error", token, got)
		}
	}
}

func FuzzEncodeKey(f *testing.F) {
	for _, tt := range keyCases {
		f.Add(tt.key)
		f.Add(tt.token)
	}
	f.Fuzz(func(t *testing.T, key string) {
		token := EncodeKey(key)
		if !validToken.MatchString(token) || strings.Contains(token, ".") {
			t.Fatalf("EncodeKey(%q) = %q: not a valid key token", key, token)
		}
		back, err := DecodeKey(token)
		if err != nil || back != key {
			t.Fatalf("DecodeKey(EncodeKey(%q)) = %q, %v", key, back, err)
		}
		// Decoding is the exact inverse: what decodes encodes back.
		if k, err := DecodeKey(key); err == nil && EncodeKey(k) != key {
			t.Fatalf("DecodeKey(%q) = %q, which encodes as %q", key, k, EncodeKey(k))
		}
	})
}
