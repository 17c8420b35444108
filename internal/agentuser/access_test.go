package agentuser

import (
	"io/fs"
	"testing"
)

func TestCanAccess(t *testing.T) {
	const agent, gw, agentGrp, gwGrp, other = 1001, 1000, 2001, 2000, 3000
	gids := []uint32{agentGrp, other}
	tests := []struct {
		name     string
		uid, gid uint32
		mode     fs.FileMode
		user     uint32
		want     Want
		ok       bool
	}{
		{"owner reads 0600", agent, gwGrp, 0o600, agent, Read, true},
		{"owner writes 0600", agent, gwGrp, 0o600, agent, Read | Write, true},
		{"owner cannot exec 0600", agent, gwGrp, 0o600, agent, Exec, false},
		{"other cannot read 0600", gw, gwGrp, 0o600, agent, Read, false},
		{"other reads 0644", gw, gwGrp, 0o644, agent, Read, true},
		{"other cannot write 0644", gw, gwGrp, 0o644, agent, Write, false},
		{"group reads 0640", gw, agentGrp, 0o640, agent, Read, true},
		{"supplementary group reads 0640", gw, other, 0o640, agent, Read, true},
		{"group cannot write 0640", gw, agentGrp, 0o640, agent, Write, false},
		{"not in group: other bits 0640", gw, gwGrp, 0o640, agent, Read, false},
		{"owner bits win over others", agent, gwGrp, 0o077, agent, Read, false},
		{"group bits win over others", gw, agentGrp, 0o707, agent, Read, false},
		{"dir search 0751", gw, gwGrp, fs.ModeDir | 0o751, agent, Exec, true},
		{"dir no list 0751", gw, gwGrp, fs.ModeDir | 0o751, agent, Read, false},
		{"sticky tmp writable", 0, 0, fs.ModeDir | fs.ModeSticky | 0o777, agent, Write | Exec, true},
		{"want nothing", gw, gwGrp, 0, agent, 0, true},
		{"root reads 0000", gw, gwGrp, 0, 0, Read | Write, true},
		{"root cannot exec a file without x", gw, gwGrp, 0o600, 0, Exec, false},
		{"root execs a file with any x", gw, gwGrp, 0o601, 0, Exec, true},
		{"root searches a dir 0000", gw, gwGrp, fs.ModeDir, 0, Exec, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := canAccess(tt.uid, tt.gid, tt.mode, tt.user, gids, tt.want); got != tt.ok {
				t.Errorf("canAccess(%d, %d, %v, %d, %v, %v) = %v, want %v", tt.uid, tt.gid, tt.mode, tt.user, gids, tt.want, got, tt.ok)
			}
		})
	}
}

// FuzzCanAccess checks properties that hold for any file and user: asking
// for less never fails where asking for more succeeds, granting more bits
// never takes access away, and only the triplet of the user's class counts.
func FuzzCanAccess(f *testing.F) {
	f.Add(uint32(1000), uint32(1000), uint32(0o640), uint32(1001), uint32(1000), uint8(Read))
	f.Add(uint32(1001), uint32(2000), uint32(0o600), uint32(1001), uint32(1001), uint8(Read|Write))
	f.Add(uint32(0), uint32(0), uint32(0o1777|uint32(fs.ModeDir)), uint32(1001), uint32(1001), uint8(Write|Exec))
	f.Add(uint32(5), uint32(6), uint32(0), uint32(0), uint32(0), uint8(Exec))
	f.Fuzz(func(t *testing.T, fileUID, fileGID, rawMode, uid, gid uint32, rawWant uint8) {
		mode := fs.FileMode(rawMode) & (fs.ModePerm | fs.ModeDir | fs.ModeSticky)
		want := Want(rawWant) & (Read | Write | Exec)
		gids := []uint32{gid}
		got := canAccess(fileUID, fileGID, mode, uid, gids, want)
		for sub := Want(0); sub <= 7; sub++ {
			if sub&want == sub && got && !canAccess(fileUID, fileGID, mode, uid, gids, sub) {
				t.Fatalf("granted %v but not its part %v", want, sub)
			}
		}
		if got && !canAccess(fileUID, fileGID, mode|fs.ModePerm, uid, gids, want) {
			t.Fatalf("more permission bits took access away")
		}
		if uid == 0 {
			return
		}
		var class fs.FileMode
		switch {
		case uid == fileUID:
			class = 0o077 // the owner's triplet alone counts
		case gid == fileGID:
			class = 0o707
		default:
			class = 0o770
		}
		if canAccess(fileUID, fileGID, mode^(mode&class)|class, uid, gids, want) != got {
			t.Fatalf("bits outside the user's class changed the answer (mode %v, uid %d, gid %d)", mode, uid, gid)
		}
	})
}

func TestWantString(t *testing.T) {
	for w, s := range map[Want]string{0: "-", Read: "r", Read | Write: "rw", Write | Exec: "wx", Read | Write | Exec: "rwx"} {
		if got := w.String(); got != s {
			t.Errorf("Want(%d) = %q, want %q", w, got, s)
		}
	}
}
