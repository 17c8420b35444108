// Package agentuser runs the agent CLIs as a user other than the gateway's
// (AGENT_USER): it looks the user up, and checks at start that the gateway
// can switch to it and that the files in CONFIG_DIR are set up so the agent
// can do its work (read the persona, write memory.md) but can reach neither
// the gateway's secrets and state nor its schedule.
//
// Access is judged from owner, group and mode bits and the user's groups,
// walking every parent directory for search permission, as the kernel does
// without ACLs. POSIX ACLs, SELinux, AppArmor and read-only mounts are not
// considered: with ACLs on CONFIG_DIR the check may pass where the kernel
// would refuse, or the other way round. Everything here is safe for
// concurrent use; nothing holds state between calls.
package agentuser

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/agentgateway/gateway/internal/proc"
)

// User is the identity the agent CLIs run as.
type User struct {
	// Name is the login name; for a uid with no passwd entry it is the uid.
	Name string
	UID  uint32
	// GID is the primary group.
	GID uint32
	// Groups are the supplementary groups (without GID).
	Groups []uint32
	// Home is the home directory from the passwd entry; the CLIs get it as
	// HOME (claude keeps its sessions under $HOME/.claude).
	Home string
	// GroupName is the primary group's name, or its gid when it has none.
	GroupName string
}

// ErrRoot is returned by Lookup for uid 0: the agent would get everything
// the separate user is meant to keep from it.
var ErrRoot = errors.New("the agent user must not be root")

// Lookup finds the user named by a user name or a numeric uid, with its
// primary and supplementary groups. The user must have a passwd entry.
func Lookup(nameOrUID string) (*User, error) {
	var u *user.User
	var err error
	if _, perr := strconv.ParseUint(nameOrUID, 10, 32); perr == nil {
		u, err = user.LookupId(nameOrUID)
	} else {
		u, err = user.Lookup(nameOrUID)
	}
	if err != nil {
		return nil, fmt.Errorf("look up agent user %q: %w", nameOrUID, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("look up agent user %q: uid %q: %w", nameOrUID, u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("look up agent user %q: gid %q: %w", nameOrUID, u.Gid, err)
	}
	if uid == 0 {
		return nil, fmt.Errorf("look up agent user %q: %w", nameOrUID, ErrRoot)
	}
	out := &User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir, GroupName: u.Gid}
	if g, err := user.LookupGroupId(u.Gid); err == nil {
		out.GroupName = g.Name
	}
	ids, err := u.GroupIds()
	if err != nil {
		return nil, fmt.Errorf("look up the groups of agent user %q: %w", u.Username, err)
	}
	for _, s := range ids {
		g, err := strconv.ParseUint(s, 10, 32)
		if err != nil || uint32(g) == out.GID {
			continue
		}
		out.Groups = append(out.Groups, uint32(g))
	}
	return out, nil
}

// Credential is what proc.Spec needs to start a process as u.
func (u *User) Credential() *proc.Credential {
	return &proc.Credential{UID: u.UID, GID: u.GID, Groups: append([]uint32(nil), u.Groups...)}
}

// gids are the primary and supplementary groups.
func (u *User) gids() []uint32 {
	return append([]uint32{u.GID}, u.Groups...)
}

// Capability bits (linux/capability.h) the gateway needs: switching user and group, signalling the agent's processes (stop,
// timeout, the sweep after a turn) and handing the system prompt file to
// the agent.
const (
	capChown       = 0
	capDACOverride = 1
	capKill        = 5
	capSetGID      = 6
	capSetUID      = 7
)

// neededCaps names each capability a non-root gateway needs, in order.
var neededCaps = []struct {
	bit  uint
	name string
}{
	{capSetUID, "CAP_SETUID"},
	{capSetGID, "CAP_SETGID"},
	{capKill, "CAP_KILL"},
	{capChown, "CAP_CHOWN"},
}

// Privileges is what the gateway process may do: its effective uid and its
// effective capability set (CapEff in /proc/self/status).
type Privileges struct {
	EUID   int
	CapEff uint64
}

// Self reads the privileges of the running process.
func Self() (Privileges, error) {
	p := Privileges{EUID: os.Geteuid()}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return p, fmt.Errorf("read capabilities: %w", err)
	}
	defer f.Close()
	capEff, err := parseCapEff(f)
	if err != nil {
		return p, fmt.Errorf("read capabilities: %w", err)
	}
	p.CapEff = capEff
	return p, nil
}

// parseCapEff finds the CapEff line of /proc/<pid>/status.
func parseCapEff(r interface{ Read([]byte) (int, error) }) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("CapEff %q: %w", strings.TrimSpace(rest), err)
		}
		return v, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("no CapEff line")
}

// missingCaps lists the capabilities the gateway lacks to run the agent as
// another user. Root normally holds them all, but a container may drop
// them, so root is judged by its capabilities too.
func (p Privileges) missingCaps() []string {
	var out []string
	for _, c := range neededCaps {
		if p.CapEff&(1<<c.bit) == 0 {
			out = append(out, c.name)
		}
	}
	return out
}
