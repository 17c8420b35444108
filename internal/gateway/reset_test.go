package gateway

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentgateway/gateway/internal/archive"
	"github.com/agentgateway/gateway/internal/config"
)

// /claude-reset is a clean slate (DESIGN decision 23), also across a
// restart between the reset and the next prompt: the next session is
// given no earlier turn. A session lost later without anyone asking (here
// the retry ladder) is given the recent conversation, but only what was
// said since the reset.
func TestResetIsACleanSlateAcrossARestart(t *testing.T) {
	// Run by TestResetIsACleanSlateWhateverTheMinute, the test is told the
	// wall clock its zone shows.
	wall := os.Getenv(wallClockEnv)
	if got := time.Now().Format("15:04"); wall != "" && got != wall {
		t.Fatalf("the wall clock shows %s, want %s: TZ=%s was not taken", got, wall, os.Getenv("TZ"))
	}
	// The turn before the reset carries a word that no timestamp, id or
	// port in the recent conversation can hold by chance ("42" was in
	// every one stamped at :42).
	marker := "MARK-" + rand.Text()
	cli := newFilesCLI(t)
	env := map[string]string{config.EnvHistoryMessages: "20"}
	first, work := startFilesGateway(t, cli, harnessOptions{env: env})
	m := first.mention(first.channel, "remember the word "+marker)
	if got := first.waitAnswer(first.channel, m.ID).Content; got != "Answer 1." {
		t.Fatalf("answer = %q", got)
	}
	reset := first.fd.Interact(first.channel, first.user, "claude-reset", nil)
	if got := first.answer(reset); !strings.Contains(got, "new conversation") {
		t.Fatalf("/claude-reset answered %q", got)
	}
	if err := first.stop(); err != nil {
		t.Fatal(err)
	}

	env = map[string]string{config.EnvHistoryMessages: "20", config.EnvWorkDir: work}
	second, _ := startFilesGateway(t, cli, harnessOptions{env: env, fd: first.fd, configDir: first.cfg.ConfigDir})
	second.guild, second.channel, second.user = first.guild, first.channel, first.user
	m = second.mention(second.channel, "and now?")
	second.waitAnswer(second.channel, m.ID)
	if args := cli.args(2); strings.Contains(args, "--resume") {
		t.Errorf("the run after the reset resumes:\n%s", args)
	}
	if got := cli.prompt(2); got != "and now?" {
		t.Errorf("prompt after the reset = %q, want it alone: the model must see no earlier turn", got)
	}

	// The exchange since the reset reaches the archive's recent exchanges
	// (written behind the turn) before the session is lost.
	recent := filepath.Join(second.cfg.ConfigDir, ArchiveDir, second.channel.String(), archive.RecentFile)
	second.fd.Wait(t, "the exchange after the reset archived", waitLong, func() bool {
		data, err := os.ReadFile(recent)
		return err == nil && strings.Contains(string(data), "and now?")
	})

	// Runs 3 and 4 resume and fail; run 5 starts afresh, given what was
	// said since the reset and nothing before it.
	cli.failNext("2")
	m = second.mention(second.channel, "still there?")
	second.waitAnswer(second.channel, m.ID)
	if cli.runs() != 5 || !strings.Contains(cli.args(3), "--resume") || strings.Contains(cli.args(5), "--resume") {
		t.Fatalf("runs = %d; args 3:\n%s\nargs 5:\n%s", cli.runs(), cli.args(3), cli.args(5))
	}
	prompt := cli.prompt(5)
	if !strings.HasPrefix(prompt, archive.SectionStart+"\n") || !strings.HasSuffix(prompt, archive.SectionEnd+"\n\nstill there?") {
		t.Fatalf("prompt of the lost session's successor does not carry the recent conversation:\n%s", prompt)
	}
	if !strings.Contains(prompt, ": and now?\nassistant: Answer 2.\n") {
		t.Errorf("recent conversation lacks the exchange since the reset:\n%s", prompt)
	}
	if wall != "" && !strings.Contains(prompt, " "+wall+"): and now?\n") {
		t.Errorf("recent conversation does not show the exchange since the reset at %s:\n%s", wall, prompt)
	}
	if strings.Contains(prompt, marker) {
		t.Errorf("recent conversation carries a turn from before the reset:\n%s", prompt)
	}
}

// wallClockEnv, in the environment of a child process started by
// TestResetIsACleanSlateWhateverTheMinute, is the wall clock ("18:42")
// that the child's zone shows when it starts.
const wallClockEnv = "GATEWAY_TEST_WALL_CLOCK"

// The recent conversation's headings carry the time of each exchange in
// time.Local ("alice (2026-12-07 18:42): and now?"), and a test cannot set
// time.Local in its own process (tests run in parallel). So the reset test
// runs again in a child process whose zone (TZ, a zone file written here)
// puts its wall clock at 18:42, 18:00 and 18:59.
func TestResetIsACleanSlateWhateverTheMinute(t *testing.T) {
	for _, minute := range []int{42, 0, 59} {
		wall := fmt.Sprintf("18:%02d", minute)
		t.Run(wall, func(t *testing.T) {
			zone := zoneFileAt(t, time.Now(), 18, minute)
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestResetIsACleanSlateAcrossARestart$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "TZ="+zone, wallClockEnv+"="+wall)
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestResetIsACleanSlateAcrossARestart") {
				t.Fatalf("the reset test at %s: %v\n%s", wall, err, out)
			}
		})
	}
}

// zoneFileAt writes a zone file (TZif, RFC 8536) of one fixed offset, to
// the second, that puts the wall clock at hour:minute:00 at now, and
// returns its path for TZ. The offset is within 12 hours of UTC.
func zoneFileAt(t *testing.T, now time.Time, hour, minute int) string {
	t.Helper()
	const day = 24 * 60 * 60
	offset := ((hour*60+minute)*60 - int(now.Unix()%day) + day) % day
	if offset > day/2 {
		offset -= day
	}
	data := append([]byte("TZif"), make([]byte, 16)...) // version 1, reserved
	// No transitions, one local time type, and its 4-byte designation.
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} { // isut, isstd, leap, time, type, char
		data = binary.BigEndian.AppendUint32(data, n)
	}
	data = binary.BigEndian.AppendUint32(data, uint32(int32(offset)))
	data = append(data, 0, 0) // not DST; designation at index 0
	data = append(data, "WLL\x00"...)
	loc, err := time.LoadLocationFromTZData("wall", data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := now.In(loc).Format(time.TimeOnly), fmt.Sprintf("%02d:%02d:00", hour, minute); got != want {
		t.Fatalf("the zone file puts the wall clock at %s, want %s", got, want)
	}
	path := filepath.Join(t.TempDir(), "zone")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
