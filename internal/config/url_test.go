package config

import (
	"net/url"
	"strings"
	"testing"
)

// What parseAPIURL accepts is an http(s) URL with a host whose path ends
// in /api/v9; what it rejects is never quoted with its password.
func FuzzParseAPIURL(f *testing.F) {
	for _, s := range []string{"", "https://discord.com/api/v9", "http://127.0.0.1:3000/api/v9/", "http://x/api",
		"ws://x/api/v9", "https://u:pw-secret@x/api/v8", "http://%zz", "localhost:3000", "http://x/capi/v9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseAPIURL(EnvDiscordAPIBaseURL, s)
		if err != nil {
			if u, perr := url.Parse(s); perr == nil && u.User != nil {
				if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(err.Error(), pw) {
					t.Errorf("the error shows the password: %v", err)
				}
			}
			return
		}
		if s == "" {
			return
		}
		u, perr := url.Parse(got)
		if perr != nil || u.Host == "" || !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/api/v9") ||
			(!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) {
			t.Errorf("parseAPIURL accepted %q", s)
		}
	})
}
