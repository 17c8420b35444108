package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The admin server's settings: ADMIN_TOKEN is required with AGENT_USER
// (the agent on the same host could otherwise use the loopback server as
// the operator does) and is as long as a webhook secret must be;
// ADMIN_HOSTS and ADMIN_TRUST_PROXY are read.
func TestAdminSettings(t *testing.T) {
	t.Parallel()
	const token = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		env  map[string]string
		// problems are the variables with a problem, each with a phrase
		// its message must hold; none: it loads.
		problems map[string]string
		check    func(*Config) any
		want     any
	}{
		{
			name:     "agent user without a token",
			env:      map[string]string{EnvAgentUser: "agent", EnvAdminAddr: "127.0.0.1:8081"},
			problems: map[string]string{EnvAdminToken: "ADMIN_TOKEN must be set when AGENT_USER is set"},
		},
		{
			name:     "agent user, a bare port, no token",
			env:      map[string]string{EnvAgentUser: "1001", EnvAdminAddr: "9090"},
			problems: map[string]string{EnvAdminToken: "openssl rand -hex 32"},
		},
		{
			name:  "agent user with a token",
			env:   map[string]string{EnvAgentUser: "agent", EnvAdminAddr: "127.0.0.1:8081", EnvAdminToken: token},
			check: func(c *Config) any { return c.AdminAddr + " " + c.AdminToken },
			want:  "127.0.0.1:8081 " + token,
		},
		{
			name:  "agent user without the admin server",
			env:   map[string]string{EnvAgentUser: "agent"},
			check: func(c *Config) any { return c.AdminAddr },
			want:  "",
		},
		{
			name:     "a short token",
			env:      map[string]string{EnvAdminAddr: "127.0.0.1:8081", EnvAdminToken: "fifteen-bytes.."},
			problems: map[string]string{EnvAdminToken: "ADMIN_TOKEN is 15 bytes long; it must have at least 16"},
		},
		{
			name:  "a token of 16 bytes",
			env:   map[string]string{EnvAdminAddr: "127.0.0.1:8081", EnvAdminToken: "sixteen-bytes..."},
			check: func(c *Config) any { return c.AdminToken },
			want:  "sixteen-bytes...",
		},
		{
			name:  "hosts",
			env:   map[string]string{EnvAdminHosts: " gw.lan, Admin.Example.com:443 ,[::1],[2001:db8::1]:8443,10.0.0.7"},
			check: func(c *Config) any { return c.AdminHosts },
			want:  []string{"gw.lan", "admin.example.com:443", "[::1]", "[2001:db8::1]:8443", "10.0.0.7"},
		},
		{
			name:     "a host with a scheme",
			env:      map[string]string{EnvAdminHosts: "gw.lan,https://admin.example.com"},
			problems: map[string]string{EnvAdminHosts: `"https://admin.example.com" is not a host or host:port`},
		},
		{
			name:     "a host with a bad port",
			env:      map[string]string{EnvAdminHosts: "gw.lan:0"},
			problems: map[string]string{EnvAdminHosts: `"gw.lan:0" is not a host or host:port`},
		},
		{
			name:     "an empty list",
			env:      map[string]string{EnvAdminHosts: " , "},
			problems: map[string]string{EnvAdminHosts: "names no hosts"},
		},
		{
			name:  "trust the proxy",
			env:   map[string]string{EnvAdminTrustProxy: "true"},
			check: func(c *Config) any { return c.AdminTrustProxy },
			want:  true,
		},
		{
			name:     "trust the proxy, maybe",
			env:      map[string]string{EnvAdminTrustProxy: "maybe"},
			problems: map[string]string{EnvAdminTrustProxy: "ADMIN_TRUST_PROXY"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := load(t, tt.env, "", 0)
			got := map[string]string{}
			var verr *ValidationError
			if errors.As(err, &verr) {
				for _, p := range verr.Problems {
					var ve *VarError
					if errors.As(p, &ve) {
						got[ve.Var] = ve.Msg
					}
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if len(tt.problems) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if diff := cmp.Diff(tt.want, tt.check(cfg)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			for name, phrase := range tt.problems {
				if msg, ok := got[name]; !ok || !strings.Contains(msg, phrase) {
					t.Errorf("problem with %s = %q, want one saying %q (all: %v)", name, msg, phrase, got)
				}
			}
			if len(got) != len(tt.problems) {
				t.Errorf("problems %v, want only %v", got, tt.problems)
			}
			if tok := tt.env[EnvAdminToken]; tok != "" && strings.Contains(err.Error(), tok) {
				t.Errorf("the error shows the token: %v", err)
			}
		})
	}
}

// Whatever ADMIN_HOSTS holds, parsing it ends in a list or an error, and
// every name in a list is a host or host:port without a scheme or path.
func FuzzParseAdminHosts(f *testing.F) {
	for _, s := range []string{"gw.lan", "a:1,b", "[::1]:8081", "http://x", "a b", ":80", "x:", "[::1", ",,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := parseHosts(EnvAdminHosts, s)
		if err != nil {
			return
		}
		if len(hosts) == 0 && s != "" {
			t.Fatalf("%q: no hosts and no error", s)
		}
		for _, h := range hosts {
			if h == "" || strings.ContainsAny(h, "/@?# \t,") || h != strings.ToLower(h) {
				t.Errorf("%q: host %q", s, h)
			}
		}
	})
}
