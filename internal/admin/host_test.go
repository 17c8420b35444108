package admin

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A page at another name that re-resolves to the admin server (DNS
// rebinding) is refused before anything it asks for runs: the stream of
// prompts and the buttons alike. The addresses of the server itself, and
// the names in Hosts, are answered.
func TestOnlyItsOwnHostIsAnswered(t *testing.T) {
	s := startServer(t, Options{Hosts: []string{"dash.example", "proxy.example:8443"}})
	var reached []string
	s.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = append(reached, r.Method+" "+r.Host+r.URL.Path)
		w.Write([]byte("page"))
	}))
	_, port, _ := net.SplitHostPort(s.Addr())
	p, _ := strconv.Atoi(port)
	other := strconv.Itoa(p + 1)
	tests := []struct {
		method, host, path string
		status             int
	}{
		{"GET", "127.0.0.1:" + port, "/events", http.StatusOK},
		{"GET", "localhost:" + port, "/events", http.StatusOK},
		{"GET", "LocalHost:" + port, "/events", http.StatusOK},
		{"GET", "[::1]:" + port, "/events", http.StatusOK},
		{"GET", "dash.example", "/events", http.StatusOK},
		{"GET", "dash.example:9000", "/events", http.StatusOK},
		{"GET", "proxy.example:8443", "/events", http.StatusOK},

		{"GET", "evil.example:" + port, "/events", http.StatusMisdirectedRequest},
		{"POST", "evil.example:" + port, "/turns/1/stop", http.StatusMisdirectedRequest},
		{"GET", "evil.example:" + port, "/metrics", http.StatusMisdirectedRequest},
		{"GET", "evil.example:" + port, "/login", http.StatusMisdirectedRequest},
		{"GET", "127.0.0.1.evil.example:" + port, "/", http.StatusMisdirectedRequest},
		{"GET", "localhost", "/", http.StatusMisdirectedRequest},
		{"GET", "127.0.0.1:" + other, "/", http.StatusMisdirectedRequest},
		{"GET", "proxy.example", "/", http.StatusMisdirectedRequest},
		{"GET", "proxy.example:443", "/", http.StatusMisdirectedRequest},
		{"GET", "sub.dash.example", "/", http.StatusMisdirectedRequest},

		// The container's HEALTHCHECK asks whatever the name.
		{"GET", "evil.example:" + port, "/healthz", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.host+tt.path, func(t *testing.T) {
			reached = nil
			req, _ := http.NewRequest(tt.method, s.url+tt.path, nil)
			req.Host = tt.host
			a := do(t, http.DefaultClient, req)
			if a.status != tt.status {
				t.Errorf("status %d, want %d (%q)", a.status, tt.status, a.body)
			}
			if tt.status == http.StatusMisdirectedRequest {
				if len(reached) != 0 {
					t.Errorf("the mounted handler ran: %v", reached)
				}
				if a.ctype != "text/plain; charset=utf-8" || !strings.Contains(a.body, "ADMIN_HOSTS") || strings.Contains(a.body, "evil") {
					t.Errorf("answer %s %q: want a short plain message naming ADMIN_HOSTS, not echoing the host", a.ctype, a.body)
				}
			}
		})
	}
}

func TestHostPolicy(t *testing.T) {
	tcp := func(s string) net.Addr {
		a, err := net.ResolveTCPAddr("tcp", s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	tests := []struct {
		name       string
		configured string
		listening  net.Addr
		hosts      []string
		ok, refuse []string
	}{
		{
			name: "loopback", configured: "127.0.0.1:8081", listening: tcp("127.0.0.1:8081"),
			ok:     []string{"127.0.0.1:8081", "localhost:8081", "[::1]:8081", "LOCALHOST:8081"},
			refuse: []string{"", "localhost", "127.0.0.1", "127.0.0.1:80", "evil.example:8081", "127.0.0.2:8081", "[::1]", "localhost.:8081", "localhost:8081:1", "[::1:8081"},
		},
		{
			name: "port 0 picks one", configured: "127.0.0.1:0", listening: tcp("127.0.0.1:40001"),
			ok:     []string{"127.0.0.1:40001", "localhost:40001"},
			refuse: []string{"127.0.0.1:0", "localhost:0"},
		},
		{
			name: "ipv6 loopback", configured: "[::1]:8081", listening: tcp("[::1]:8081"),
			ok:     []string{"[::1]:8081", "localhost:8081", "127.0.0.1:8081"},
			refuse: []string{"[::2]:8081", "evil.example:8081"},
		},
		{
			name: "localhost by name", configured: "localhost:8081", listening: tcp("127.0.0.1:8081"),
			ok:     []string{"localhost:8081", "127.0.0.1:8081", "[::1]:8081"},
			refuse: []string{"evil.example:8081"},
		},
		{
			name: "a LAN address", configured: "192.168.1.5:8081", listening: tcp("192.168.1.5:8081"),
			ok:     []string{"192.168.1.5:8081"},
			refuse: []string{"localhost:8081", "127.0.0.1:8081", "192.168.1.6:8081", "gw.lan:8081"},
		},
		{
			name: "a name", configured: "gw.lan:8081", listening: tcp("192.168.1.5:8081"),
			ok:     []string{"gw.lan:8081", "GW.LAN:8081", "192.168.1.5:8081"},
			refuse: []string{"gw.lan", "gw.lan:80", "evil.example:8081"},
		},
		{
			// Every address: any IP literal or localhost names it, on any
			// port (a published container port may differ); a DNS name,
			// which a rebinding attack could point here, needs Hosts.
			name: "every address", configured: ":8081", listening: tcp("[::]:8081"),
			ok:     []string{"127.0.0.1:8081", "localhost:8081", "10.0.0.7:9000", "[fe80::1]:8081", "203.0.113.9", "localhost"},
			refuse: []string{"gw.lan:8081", "evil.example:8081", "", "10.0.0.7.nip.io:8081"},
		},
		{
			name: "every address, with names", configured: "0.0.0.0:8081", listening: tcp("0.0.0.0:8081"),
			hosts:  []string{"gw.lan", "Admin.Example.com:443", "[2001:db8::1]"},
			ok:     []string{"gw.lan:8081", "gw.lan", "admin.example.com:443", "[2001:db8::1]:1"},
			refuse: []string{"admin.example.com", "admin.example.com:8081", "evil.example:8081"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newHostPolicy(tt.configured, tt.listening, tt.hosts)
			if err != nil {
				t.Fatal(err)
			}
			var wrong []string
			for _, h := range tt.ok {
				if !p.allows(h) {
					wrong = append(wrong, "refused "+h)
				}
			}
			for _, h := range tt.refuse {
				if p.allows(h) {
					wrong = append(wrong, "allowed "+h)
				}
			}
			if diff := cmp.Diff([]string(nil), wrong); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestHostPolicyRefusesBadNames(t *testing.T) {
	for _, h := range []string{"", "http://gw.lan", "gw.lan/x", "gw.lan:http", "gw.lan:70000", ":8081", "a b"} {
		if _, err := newHostPolicy("127.0.0.1:8081", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8081}, []string{h}); err == nil {
			t.Errorf("Hosts %q: no error", h)
		}
	}
}

// Whatever a Host header holds, the policy answers without panicking, and
// a name that is not an IP literal is allowed only when it is one the
// policy was given.
func FuzzHostPolicy(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8081", "localhost:8081", "[::1]:8081", "evil.example:8081", "[", "]:", ":", "gw.lan", "[::ffff:127.0.0.1]:8081", "127.1:8081", "0x7f.1:8081"} {
		f.Add(s)
	}
	p, err := newHostPolicy(":8081", &net.TCPAddr{IP: net.IPv6unspecified, Port: 8081}, []string{"gw.lan"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		if !p.allows(host) {
			return
		}
		name, _ := splitHost(host)
		if name != "gw.lan" && name != "localhost" && net.ParseIP(name) == nil {
			t.Errorf("allowed %q (name %q), which is neither an IP literal nor a given name", host, name)
		}
	})
}
