package agentuser

import (
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeFS is a file system of stat results, keyed by clean absolute path.
type fakeFS map[string]fileInfo

func (f fakeFS) stat(path string) (fileInfo, error) {
	fi, ok := f[path]
	if !ok {
		return fileInfo{}, fs.ErrNotExist
	}
	return fi, nil
}

func (f fakeFS) list(dir string) ([]string, error) {
	if _, ok := f[dir]; !ok {
		return nil, fs.ErrNotExist
	}
	var names []string
	for p := range f {
		if p != dir && filepath.Dir(p) == dir {
			names = append(names, filepath.Base(p))
		}
	}
	return names, nil
}

func (f fakeFS) resolve(path string) string { return path }

const (
	gwUID, agentUID = 0, 1001
	agentGID        = 1001
	allCaps         = ^uint64(0)
	dir             = fs.ModeDir
)

var testUser = &User{Name: "agent", UID: agentUID, GID: agentGID, Home: "/home/agent", GroupName: "agent"}

// goodFS is the setup the README describes: CONFIG_DIR owned by the
// gateway and readable by the agent's group, memory.md the agent's, state
// and the env file the gateway's alone.
func goodFS() fakeFS {
	return fakeFS{
		"/":                          {0, 0, dir | 0o755},
		"/etc":                       {0, 0, dir | 0o755},
		"/etc/gateway":               {0, 0, dir | 0o700},
		"/etc/gateway/env":           {0, 0, 0o600},
		"/srv":                       {0, 0, dir | 0o755},
		"/srv/gw":                    {gwUID, agentGID, dir | 0o750},
		"/srv/gw/soul.md":            {gwUID, agentGID, 0o640},
		"/srv/gw/identity.md":        {gwUID, agentGID, 0o640},
		"/srv/gw/agents.md":          {gwUID, agentGID, 0o640},
		"/srv/gw/user.md":            {gwUID, agentGID, 0o640},
		"/srv/gw/tools.md":           {gwUID, agentGID, 0o640},
		"/srv/gw/memory.md":          {agentUID, agentGID, 0o600},
		"/srv/gw/heartbeat.md":       {gwUID, gwUID, 0o600},
		"/srv/gw/boot.md":            {gwUID, agentGID, 0o640},
		"/srv/gw/sessions.json":      {gwUID, gwUID, 0o600},
		"/srv/gw/discord-state.json": {gwUID, gwUID, 0o600},
		"/srv/gw/.gateway.lock":      {gwUID, gwUID, 0o600},
		"/tmp":                       {0, 0, dir | fs.ModeSticky | 0o777},
		"/home":                      {0, 0, dir | 0o755},
		"/home/agent":                {agentUID, agentGID, dir | 0o700},
	}
}

var goodSetup = Setup{ConfigDir: "/srv/gw", EnvFile: "/etc/gateway/env", TempDir: "/tmp"}

// brief is a problem's file and fix, what an operator acts on.
type brief struct{ File, Fix string }

func runCheck(fsys fakeFS, priv Privileges, s Setup) []brief {
	c := &checker{u: testUser, priv: priv, fsys: fsys, gateway: "gateway"}
	var out []brief
	for _, p := range c.run(s) {
		out = append(out, brief{p.File, p.Fix})
	}
	return out
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(fakeFS)
		setup Setup
		priv  Privileges
		want  []brief
	}{
		{name: "good setup", edit: func(fakeFS) {}},
		{
			name: "env file readable by others",
			edit: func(f fakeFS) {
				f["/etc/gateway"] = fileInfo{0, 0, dir | 0o755}
				f["/etc/gateway/env"] = fileInfo{0, 0, 0o644}
			},
			want: []brief{{"/etc/gateway/env", "chmod 600 /etc/gateway/env"}},
		},
		{
			name:  "env file in CONFIG_DIR readable by the agent's group",
			edit:  func(f fakeFS) { f["/srv/gw/.env"] = fileInfo{gwUID, agentGID, 0o640} },
			setup: Setup{ConfigDir: "/srv/gw", EnvFile: "/srv/gw/.env"},
			want:  []brief{{"/srv/gw/.env", "chmod 600 /srv/gw/.env"}},
		},
		{
			name: "env file owned by the agent",
			edit: func(f fakeFS) {
				f["/etc/gateway"] = fileInfo{0, 0, dir | 0o755}
				f["/etc/gateway/env"] = fileInfo{agentUID, 0, 0o600}
			},
			want: []brief{{"/etc/gateway/env", "chown gateway /etc/gateway/env && chmod 600 /etc/gateway/env"}},
		},
		{
			name: "a container secret holding the bot token, readable by everyone",
			edit: func(f fakeFS) {
				f["/run"] = fileInfo{0, 0, dir | 0o755}
				f["/run/secrets"] = fileInfo{0, 0, dir | 0o755}
				f["/run/secrets/token"] = fileInfo{0, 0, 0o444}
				f["/run/secrets/hook"] = fileInfo{0, 0, 0o400}
			},
			setup: Setup{ConfigDir: "/srv/gw", EnvFile: "/etc/gateway/env", TempDir: "/tmp",
				SecretFiles: map[string]string{"DISCORD_BOT_TOKEN": "/run/secrets/token", "WEBHOOK_DEPLOY": "/run/secrets/hook"}},
			want: []brief{{"/run/secrets/token", "chmod 600 /run/secrets/token"}},
		},
		{
			name: "state files readable",
			edit: func(f fakeFS) {
				f["/srv/gw/sessions.json"] = fileInfo{gwUID, gwUID, 0o644}
				f["/srv/gw/inbox"] = fileInfo{gwUID, agentGID, dir | 0o750}
			},
			want: []brief{
				{"/srv/gw/inbox", "chmod 700 /srv/gw/inbox"},
				{"/srv/gw/sessions.json", "chmod 600 /srv/gw/sessions.json"},
			},
		},
		{
			name: "the ipc folder as the gateway opens it to the agent",
			edit: func(f fakeFS) {
				f["/srv/gw/ipc"] = fileInfo{gwUID, agentGID, dir | 0o710}
				f["/srv/gw/ipc/outbound"] = fileInfo{gwUID, agentGID, dir | fs.ModeSticky | 0o770}
				f["/srv/gw/ipc/failed"] = fileInfo{gwUID, gwUID, dir | 0o700}
			},
		},
		{
			name: "the ipc folder writable by the agent",
			edit: func(f fakeFS) { f["/srv/gw/ipc"] = fileInfo{gwUID, agentGID, dir | 0o770} },
			want: []brief{{"/srv/gw/ipc", "chmod go-w /srv/gw/ipc"}},
		},
		{
			name: "the ipc folder owned by the agent",
			edit: func(f fakeFS) { f["/srv/gw/ipc"] = fileInfo{agentUID, agentGID, dir | 0o700} },
			want: []brief{{"/srv/gw/ipc", "chown gateway /srv/gw/ipc && chmod go-w /srv/gw/ipc"}},
		},
		{
			name: "memory.md not writable",
			edit: func(f fakeFS) { f["/srv/gw/memory.md"] = fileInfo{gwUID, agentGID, 0o640} },
			want: []brief{{"/srv/gw/memory.md", "chown agent /srv/gw/memory.md && chmod u+rw /srv/gw/memory.md"}},
		},
		{
			name: "persona file unreadable",
			edit: func(f fakeFS) { f["/srv/gw/soul.md"] = fileInfo{gwUID, gwUID, 0o600} },
			want: []brief{{"/srv/gw/soul.md", "chgrp agent /srv/gw/soul.md && chmod g+r /srv/gw/soul.md"}},
		},
		{
			name: "CONFIG_DIR not searchable",
			edit: func(f fakeFS) { f["/srv/gw"] = fileInfo{gwUID, gwUID, dir | 0o700} },
			want: []brief{
				{"/srv/gw", "chgrp agent /srv/gw && chmod g+rx /srv/gw"},
				// Every persona file behind it, each naming the directory.
				{"/srv/gw/soul.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
				{"/srv/gw/identity.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
				{"/srv/gw/agents.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
				{"/srv/gw/user.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
				{"/srv/gw/memory.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
				{"/srv/gw/tools.md", "chgrp agent /srv/gw && chmod g+x /srv/gw"},
			},
		},
		{
			name: "CONFIG_DIR writable by the agent's group",
			edit: func(f fakeFS) { f["/srv/gw"] = fileInfo{gwUID, agentGID, dir | 0o770} },
			want: []brief{{"/srv/gw", "chmod go-w /srv/gw"}},
		},
		{
			name: "CONFIG_DIR owned by the agent",
			edit: func(f fakeFS) { f["/srv/gw"] = fileInfo{agentUID, agentGID, dir | 0o750} },
			want: []brief{{"/srv/gw", "chown gateway /srv/gw && chmod go-w /srv/gw"}},
		},
		{
			name: "a directory above CONFIG_DIR is writable",
			edit: func(f fakeFS) { f["/srv"] = fileInfo{0, 0, dir | 0o777} },
			want: []brief{{"/srv", "chmod go-w /srv"}},
		},
		{
			name: "a sticky directory above CONFIG_DIR is fine",
			edit: func(f fakeFS) { f["/srv"] = fileInfo{0, 0, dir | fs.ModeSticky | 0o777} },
		},
		{
			name: "schedule files writable or owned",
			edit: func(f fakeFS) {
				f["/srv/gw/agents.md"] = fileInfo{gwUID, agentGID, 0o660}
				f["/srv/gw/heartbeat.md"] = fileInfo{agentUID, agentGID, 0o400}
				f["/srv/gw/boot.md"] = fileInfo{gwUID, gwUID, 0o666}
			},
			want: []brief{
				{"/srv/gw/agents.md", "chown gateway /srv/gw/agents.md && chmod go-w /srv/gw/agents.md"},
				{"/srv/gw/heartbeat.md", "chown gateway /srv/gw/heartbeat.md && chmod go-w /srv/gw/heartbeat.md"},
				{"/srv/gw/boot.md", "chown gateway /srv/gw/boot.md && chmod go-w /srv/gw/boot.md"},
			},
		},
		{
			name: "temp dir private",
			edit: func(f fakeFS) { f["/tmp"] = fileInfo{0, 0, dir | 0o700} },
			want: []brief{{"/tmp", "chgrp agent /tmp && chmod g+wx /tmp, or set TMPDIR to a directory both can use"}},
		},
		{
			name: "no home",
			edit: func(f fakeFS) { delete(f, "/home/agent") },
			want: []brief{{"/home/agent", "mkdir -p /home/agent && chown agent: /home/agent"}},
		},
		{
			name: "missing capabilities",
			edit: func(fakeFS) {},
			priv: Privileges{EUID: 1000, CapEff: 1 << capSetUID},
			want: []brief{{"", "run the gateway as root, or grant the capabilities (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL CAP_CHOWN)"}},
		},
		{
			name: "absent persona and schedule files are not problems",
			edit: func(f fakeFS) {
				for _, n := range []string{"soul.md", "identity.md", "user.md", "tools.md", "boot.md", "heartbeat.md"} {
					delete(f, "/srv/gw/"+n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := goodFS()
			tt.edit(f)
			s := tt.setup
			if s.ConfigDir == "" {
				s = goodSetup
			}
			if s.TempDir == "" {
				s.TempDir = "/tmp"
			}
			priv := tt.priv
			if priv == (Privileges{}) {
				priv = Privileges{EUID: 0, CapEff: allCaps}
			}
			got := runCheck(f, priv, s)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCheckReportsEveryProblem(t *testing.T) {
	f := goodFS()
	f["/etc/gateway"] = fileInfo{0, 0, dir | 0o755}
	f["/etc/gateway/env"] = fileInfo{0, 0, 0o644}
	f["/srv/gw/memory.md"] = fileInfo{gwUID, agentGID, 0o640}
	f["/srv/gw/agents.md"] = fileInfo{gwUID, agentGID, 0o660}
	c := &checker{u: testUser, priv: Privileges{EUID: 1000}, fsys: f, gateway: "gateway"}
	err := &CheckError{User: "agent", Problems: c.run(goodSetup)}
	msg := err.Error()
	for _, want := range []string{
		"AGENT_USER=agent", "4 problems", "ACLs are not considered",
		"lacks CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_CHOWN",
		"/etc/gateway/env: the agent can read the env file", "fix: chmod 600 /etc/gateway/env",
		"/srv/gw/memory.md: the agent cannot read and write memory.md", "fix: chown agent /srv/gw/memory.md",
		"/srv/gw/agents.md: the agent can write this schedule file",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("report lacks %q:\n%s", want, msg)
		}
	}
	if n := strings.Count(msg, "\n  - "); n != 4 {
		t.Errorf("report lists %d problems, want 4:\n%s", n, msg)
	}
}

// TestCheckDeterministic guards against map order leaking
// into the report: the same file system gives the same report every time.
func TestCheckDeterministic(t *testing.T) {
	f := goodFS()
	f["/srv/gw/a.json"] = fileInfo{0, 0, 0o644}
	f["/srv/gw/b.json"] = fileInfo{0, 0, 0o644}
	f["/srv/gw/c.db"] = fileInfo{0, 0, 0o644}
	first := runCheck(f, Privileges{CapEff: allCaps}, goodSetup)
	files := make([]string, 0, len(first))
	for _, b := range first {
		files = append(files, b.File)
	}
	if !slices.IsSorted(files) || len(files) != 3 {
		t.Fatalf("files = %v, want the three state files in order", files)
	}
	for range 20 {
		if got := runCheck(maps.Clone(f), Privileges{CapEff: allCaps}, goodSetup); !slices.Equal(got, first) {
			t.Fatalf("report changed between runs:\n%v\n%v", first, got)
		}
	}
}

func TestParseCapEff(t *testing.T) {
	status := "Name:\tgateway\nCapInh:\t0000000000000000\nCapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\n"
	got, err := parseCapEff(strings.NewReader(status))
	if err != nil || got != 0xa80425fb {
		t.Fatalf("parseCapEff = %#x, %v; want 0xa80425fb", got, err)
	}
	if missing := (Privileges{EUID: 0, CapEff: got}).missingCaps(); len(missing) != 0 {
		t.Errorf("docker's default capabilities miss %v", missing)
	}
	if _, err := parseCapEff(strings.NewReader("Name:\tx\n")); err == nil {
		t.Error("no CapEff line: want an error")
	}
	if _, err := parseCapEff(strings.NewReader("CapEff:\tzz\n")); err == nil {
		t.Error("bad CapEff: want an error")
	}
}
