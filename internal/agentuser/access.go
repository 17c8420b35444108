package agentuser

import (
	"io/fs"
	"slices"
)

// Want is a set of access rights, in the bit values of a mode's
// permission triplets.
type Want uint8

// The rights canAccess checks.
const (
	Exec  Want = 1 // search, for a directory
	Write Want = 2
	Read  Want = 4
)

func (w Want) String() string {
	s := ""
	for _, r := range []struct {
		w Want
		c string
	}{{Read, "r"}, {Write, "w"}, {Exec, "x"}} {
		if w&r.w != 0 {
			s += r.c
		}
	}
	if s == "" {
		return "-"
	}
	return s
}

// canAccess reports whether a process with uid and the groups gids (primary
// and supplementary) has every right in want on a file with owner fileUID,
// group fileGID and mode, judged by the permission bits as the kernel does
// without ACLs: the owner's triplet applies to the owner, even when it
// grants less than the others; the group's to members of the file's group;
// the others' to everyone else. Root reads and writes anything and may
// execute anything with an execute bit set, and search any directory (it
// holds CAP_DAC_OVERRIDE; capabilities of a non-root uid are not
// considered). want 0 is always granted.
func canAccess(fileUID, fileGID uint32, mode fs.FileMode, uid uint32, gids []uint32, want Want) bool {
	want &= Read | Write | Exec
	if uid == 0 {
		if want&Exec == 0 || mode.IsDir() {
			return true
		}
		return mode.Perm()&0o111 != 0
	}
	perm := uint32(mode.Perm())
	var bits uint32
	switch {
	case uid == fileUID:
		bits = perm >> 6
	case slices.Contains(gids, fileGID):
		bits = perm >> 3
	default:
		bits = perm
	}
	return Want(bits&7)&want == want
}
