package agentuser

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/agentgateway/gateway/internal/persona"
)

// Setup names the places the check looks at.
type Setup struct {
	// ConfigDir is CONFIG_DIR: the persona, the schedule, the gateway's
	// state, and the CLI's working directory.
	ConfigDir string
	// EnvFile is the .env file in use, "" when there is none.
	EnvFile string
	// TempDir is where the system prompt file is written and the CLI puts
	// its temp files; "" means os.TempDir().
	TempDir string
	// SecretFiles are files holding secrets the agent must not read (the
	// bot token's and webhook secrets' *_FILE settings), by setting name.
	SecretFiles map[string]string
}

// Problem is one thing that keeps the agent user from working, or lets it
// reach what it must not.
type Problem struct {
	// File is the file or directory concerned, "" for the gateway process.
	File string
	// Msg says what is wrong.
	Msg string
	// Fix is the command (or step) that repairs it.
	Fix string
}

func (p Problem) String() string {
	s := p.Msg
	if p.File != "" {
		s = p.File + ": " + s
	}
	if p.Fix != "" {
		s += "; fix: " + p.Fix
	}
	return s
}

// CheckError is returned by Check when the setup does not hold: run and
// chat refuse to start with it.
type CheckError struct {
	User     string
	Problems []Problem
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "AGENT_USER=%s: the agent cannot run as this user safely (%d problems; ACLs are not considered):", e.User, len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// personaFiles are read by the agent (its own persona, through the system
// prompt file, and directly when it looks them up).
var personaFiles = []string{
	persona.SoulFile, persona.IdentityFile, persona.AgentsFile,
	persona.UserFile, persona.MemoryFile, persona.ToolsFile,
}

// scheduleFiles make the gateway act on their own: the agent must not be
// able to write them, nor replace them.
var scheduleFiles = []string{persona.AgentsFile, persona.HeartbeatFile, persona.BootFile}

// Check checks that the gateway can run the agent CLIs as u and that the
// files of s let the agent do its work and nothing more:
//   - the gateway may switch to u (CAP_SETUID, CAP_SETGID), signal its
//     processes (CAP_KILL) and give it the system prompt file (CAP_CHOWN);
//   - u can read the persona files and list CONFIG_DIR (its working
//     directory), read and write memory.md, write the temp dir and its home;
//   - u can read neither the .env file nor any other file in CONFIG_DIR that
//     is not markdown (sessions.json, discord-state.json, .gateway.lock and
//     whatever state comes next: everything but *.md is the gateway's),
//     and cannot change the entries of the ipc folder, which it may search
//     to post through ipc/outbound;
//   - u can write none of agents.md, heartbeat.md and boot.md, and cannot
//     create, rename or replace files in CONFIG_DIR or replace CONFIG_DIR
//     itself (a directory the agent may write lets it put its own
//     agents.md in place of the gateway's, whatever that file's mode).
//
// It returns a *CheckError listing every problem with its fix, or nil.
func Check(u *User, s Setup) error {
	priv, err := Self()
	if err != nil {
		return err
	}
	c := &checker{u: u, priv: priv, fsys: osFS{}, gateway: gatewayName()}
	if ps := c.run(s); len(ps) > 0 {
		return &CheckError{User: u.Name, Problems: ps}
	}
	return nil
}

// fileInfo is what the check needs to know of a file.
type fileInfo struct {
	uid, gid uint32
	mode     fs.FileMode
}

// statFS is the file system as the check sees it; tests fake it.
type statFS interface {
	// stat follows symbolic links.
	stat(path string) (fileInfo, error)
	// list names the entries of a directory.
	list(dir string) ([]string, error)
	// resolve returns the path with symbolic links resolved, or path when
	// it cannot be resolved.
	resolve(path string) string
}

type checker struct {
	u       *User
	priv    Privileges
	fsys    statFS
	gateway string // the gateway user's name, for fixes
}

func (c *checker) run(s Setup) []Problem {
	var ps []Problem
	add := func(p Problem) { ps = append(ps, p) }

	if missing := c.priv.missingCaps(); len(missing) > 0 {
		add(Problem{
			Msg: fmt.Sprintf("the gateway cannot run the agent as %s: it lacks %s", c.u.Name, strings.Join(missing, ", ")),
			Fix: "run the gateway as root, or grant the capabilities (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL CAP_CHOWN)",
		})
	}

	dir := c.fsys.resolve(filepath.Clean(s.ConfigDir))
	exists := func(name string) bool {
		_, err := c.fsys.stat(filepath.Join(dir, name))
		return err == nil
	}

	// The working directory: listed and searched, never written.
	if blocker, ok := c.reach(dir, Read|Exec); !ok {
		add(c.cannot(blocker, dir, Read|Exec, "the agent cannot open CONFIG_DIR, its working directory"))
	}
	for _, name := range personaFiles {
		if !exists(name) {
			continue
		}
		path := c.fsys.resolve(filepath.Join(dir, name))
		want := Read
		what := "the agent cannot read this persona file"
		if name == persona.MemoryFile {
			want = Read | Write
			what = "the agent cannot read and write memory.md, its long-term memory"
		}
		if blocker, ok := c.reach(path, want); !ok {
			p := c.cannot(blocker, path, want, what)
			if blocker == path && name == persona.MemoryFile {
				// The agent's own file: it owns it, so it keeps it
				// after the gateway merges concurrent writes.
				p.Fix = fmt.Sprintf("chown %s %s && chmod u+rw %s", c.u.Name, path, path)
			}
			add(p)
		}
	}

	tmp := s.TempDir
	if tmp == "" {
		tmp = os.TempDir()
	}
	tmp = c.fsys.resolve(filepath.Clean(tmp))
	if blocker, ok := c.reach(tmp, Write|Exec); !ok {
		p := c.cannot(blocker, tmp, Write|Exec, "the agent cannot write temp files nor read the system prompt file here")
		if blocker == tmp {
			p.Fix += ", or set TMPDIR to a directory both can use"
		}
		add(p)
	}
	if c.u.Home == "" {
		add(Problem{Msg: fmt.Sprintf("%s has no home directory; claude keeps its sessions under $HOME/.claude", c.u.Name),
			Fix: fmt.Sprintf("usermod -d /home/%s %s && mkdir -p /home/%s && chown %s: /home/%s", c.u.Name, c.u.Name, c.u.Name, c.u.Name, c.u.Name)})
	} else {
		home := c.fsys.resolve(filepath.Clean(c.u.Home))
		if _, err := c.fsys.stat(home); errors.Is(err, fs.ErrNotExist) {
			add(Problem{File: home, Msg: "the agent's home directory does not exist; claude keeps its sessions under $HOME/.claude",
				Fix: fmt.Sprintf("mkdir -p %s && chown %s: %s", home, c.u.Name, home)})
		} else if blocker, ok := c.reach(home, Write|Exec); !ok {
			add(c.cannot(blocker, home, Write|Exec, "the agent cannot write its home directory; claude keeps its sessions under $HOME/.claude"))
		}
	}

	// Secrets and state: unreadable.
	env := ""
	if s.EnvFile != "" {
		env = c.fsys.resolve(filepath.Clean(s.EnvFile))
		if fi, err := c.fsys.stat(env); err == nil {
			if p, bad := c.readable(env, fi, "the agent can read the env file, which holds the bot token"); bad {
				add(p)
			}
		}
	}
	secretNames := make([]string, 0, len(s.SecretFiles))
	for name := range s.SecretFiles {
		secretNames = append(secretNames, name)
	}
	sort.Strings(secretNames)
	for _, name := range secretNames {
		path := c.fsys.resolve(filepath.Clean(s.SecretFiles[name]))
		if fi, err := c.fsys.stat(path); err == nil {
			if p, bad := c.readable(path, fi, "the agent can read "+name+"_FILE, which holds a gateway secret"); bad {
				add(p)
			}
		}
	}
	names, err := c.fsys.list(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		add(Problem{File: dir, Msg: "cannot list CONFIG_DIR: " + err.Error()})
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, ".md") || name == skillsDir {
			continue // the persona and the skills are the agent's to read
		}
		if name == ipcDir {
			// The agent posts through ipc/outbound: it may search the
			// folder, never change its entries.
			ps = append(ps, c.ipcFolder(c.fsys.resolve(filepath.Join(dir, name)))...)
			continue
		}
		path := c.fsys.resolve(filepath.Join(dir, name))
		if path == env {
			continue // reported above
		}
		fi, err := c.fsys.stat(path)
		if err != nil || (!fi.mode.IsRegular() && !fi.mode.IsDir()) {
			continue
		}
		if p, bad := c.readable(path, fi, "the agent can read this gateway state file"); bad {
			add(p)
		}
	}

	// The schedule: not writable, not replaceable.
	for _, name := range scheduleFiles {
		path := c.fsys.resolve(filepath.Join(dir, name))
		fi, err := c.fsys.stat(path)
		if err != nil {
			continue
		}
		if fi.uid == c.u.UID {
			add(Problem{File: path, Msg: "the agent owns this schedule file, so it can change it", Fix: c.disown(path, false)})
		} else if _, ok := c.reach(path, Write); ok {
			add(Problem{File: path, Msg: "the agent can write this schedule file", Fix: c.disown(path, false)})
		}
	}
	ps = append(ps, c.replaceable(dir)...)
	return ps
}

// reach reports whether the agent can search every directory above path
// and has want on path itself; when not, blocker is the first path that
// stops it.
func (c *checker) reach(path string, want Want) (blocker string, ok bool) {
	for _, d := range ancestors(path) {
		fi, err := c.fsys.stat(d)
		if err != nil {
			return d, false
		}
		if !canAccess(fi.uid, fi.gid, fi.mode, c.u.UID, c.u.gids(), Exec) {
			return d, false
		}
	}
	fi, err := c.fsys.stat(path)
	if err != nil {
		return path, false
	}
	if !canAccess(fi.uid, fi.gid, fi.mode, c.u.UID, c.u.gids(), want) {
		return path, false
	}
	return "", true
}

// cannot is the problem of a path the agent cannot reach with want.
func (c *checker) cannot(blocker, path string, want Want, what string) Problem {
	fi, err := c.fsys.stat(blocker)
	if err != nil {
		return Problem{File: path, Msg: what + fmt.Sprintf(" (%s: %v)", blocker, err)}
	}
	if blocker != path {
		what += fmt.Sprintf(" (it cannot search %s)", blocker)
		want = Exec
	}
	return Problem{File: path, Msg: what, Fix: c.grant(blocker, fi, want)}
}

// grant is the command giving the agent want on path: through the owner's
// bits when it owns the file, else through its primary group.
func (c *checker) grant(path string, fi fileInfo, want Want) string {
	if fi.uid == c.u.UID {
		return fmt.Sprintf("chmod u+%s %s", want, path)
	}
	g := fmt.Sprintf("chgrp %s %s && ", c.u.GroupName, path)
	if slices.Contains(c.u.gids(), fi.gid) {
		g = ""
	}
	return g + fmt.Sprintf("chmod g+%s %s", want, path)
}

// readable reports the problem when the agent can read path (or, for a
// directory, search it) or owns it.
func (c *checker) readable(path string, fi fileInfo, what string) (Problem, bool) {
	want := Read
	if fi.mode.IsDir() {
		want = Exec
	}
	if fi.uid == c.u.UID {
		return Problem{File: path, Msg: what + " (it owns it)", Fix: c.disown(path, true)}, true
	}
	if _, ok := c.reach(path, want); ok {
		return Problem{File: path, Msg: what, Fix: c.private(path, fi)}, true
	}
	return Problem{}, false
}

// private is the command making path the gateway's alone.
func (c *checker) private(path string, fi fileInfo) string {
	if fi.mode.IsDir() {
		return "chmod 700 " + path
	}
	return "chmod 600 " + path
}

// disown is the command giving path back to the gateway user; private
// also takes away everyone else's access, otherwise only write access.
func (c *checker) disown(path string, private bool) string {
	mode := "go-w"
	if private {
		mode = "600"
	}
	return fmt.Sprintf("chown %s %s && chmod %s %s", c.gateway, path, mode, path)
}

// replaceable reports CONFIG_DIR, or a directory above it, that the agent
// could change: a directory it may write lets it create, rename and
// replace entries (an agents.md of its own in place of the gateway's), and
// one it owns it may chmod. A sticky directory (/tmp) lets it rename only
// entries it owns, or all when it owns the directory.
func (c *checker) replaceable(dir string) []Problem {
	var ps []Problem
	fi, err := c.fsys.stat(dir)
	if err != nil {
		return nil
	}
	switch {
	case fi.uid == c.u.UID:
		ps = append(ps, Problem{File: dir, Msg: "the agent owns CONFIG_DIR, so it can replace the schedule files and read the gateway's state",
			Fix: c.disown(dir, false)})
	case canAccess(fi.uid, fi.gid, fi.mode, c.u.UID, c.u.gids(), Write|Exec):
		ps = append(ps, Problem{File: dir, Msg: "the agent can write CONFIG_DIR, so it can replace the schedule files (agents.md) with its own",
			Fix: "chmod go-w " + dir})
	}
	child := dir
	for _, a := range reverse(ancestors(dir)) {
		afi, err := c.fsys.stat(a)
		if err != nil {
			break
		}
		cfi, err := c.fsys.stat(child)
		if err != nil {
			break
		}
		switch {
		case afi.uid == c.u.UID:
			ps = append(ps, Problem{File: a, Msg: fmt.Sprintf("the agent owns this directory above CONFIG_DIR, so it can put another %s in its place", child),
				Fix: c.disown(a, false)})
		case canAccess(afi.uid, afi.gid, afi.mode, c.u.UID, c.u.gids(), Write|Exec) &&
			(afi.mode&fs.ModeSticky == 0 || cfi.uid == c.u.UID):
			ps = append(ps, Problem{File: a, Msg: fmt.Sprintf("the agent can write this directory above CONFIG_DIR, so it can put another %s in its place", child),
				Fix: "chmod go-w " + a})
		}
		child = a
	}
	return ps
}

// ancestors lists the directories above path, from the root down.
func ancestors(path string) []string {
	var out []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		out = append(out, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	return reverse(out)
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

// gatewayName is the gateway user's name (its uid when it has none).
func gatewayName() string {
	id := strconv.Itoa(os.Geteuid())
	if u, err := user.LookupId(id); err == nil {
		return u.Username
	}
	return id
}

// ipcFolder reports the ipc folder when the agent could replace its
// entries: outbound/ or failed/ swapped for a link would have the gateway
// read or move files elsewhere. The gateway opens it to the agent's group
// for search only (0710), and outbound/ for writing.
func (c *checker) ipcFolder(path string) []Problem {
	fi, err := c.fsys.stat(path)
	switch {
	case err != nil:
		return nil
	case fi.uid == c.u.UID:
		return []Problem{{File: path, Msg: "the agent owns the ipc folder, so it can swap outbound/ and failed/ for links", Fix: c.disown(path, false)}}
	case canAccess(fi.uid, fi.gid, fi.mode, c.u.UID, c.u.gids(), Write|Exec):
		return []Problem{{File: path, Msg: "the agent can write the ipc folder, so it can swap outbound/ and failed/ for links", Fix: "chmod go-w " + path}}
	}
	return nil
}

// ipcDir is CONFIG_DIR's folder of proactive messages (gateway.IPCDir),
// which the agent may post through.
const ipcDir = "ipc"

// skillsDir is CONFIG_DIR's folder of skills (persona.SkillsDir), which the
// agent reads.
const skillsDir = "skills"

// osFS is the real file system.
type osFS struct{}

func (osFS) stat(path string) (fileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileInfo{}, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileInfo{}, fmt.Errorf("stat %s: no owner information", path)
	}
	return fileInfo{uid: st.Uid, gid: st.Gid, mode: fi.Mode()}, nil
}

func (osFS) list(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names, err
}

func (osFS) resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return path
}
