package jsinbox

import (
	"strings"
	"testing"
)

var laneTests = []struct{ lane, token string }{
	{"1234567890123456789", "1234567890123456789"},
	{"system", "system"},
	{"", "b"},
	{"0123", "bGAYTEMY"}, // a leading zero is not a snowflake's
	{"99999999999999999999", "bHE4TSOJZHE4TSOJZHE4TSOJZHE4TSOJZ"}, // beyond uint64
	{"a lane with spaces", "bMEQGYYLOMUQHO2LUNAQHG4DBMNSXG"},
	{"gateway.events.>", "bM5QXIZLXMF4S4ZLWMVXHI4ZOHY"},
	{"System", "bKN4XG5DFNU"},
}

func TestLaneTokens(t *testing.T) {
	for _, tt := range laneTests {
		if got := laneToken(tt.lane); got != tt.token {
			t.Errorf("laneToken(%q) = %q, want %q", tt.lane, got, tt.token)
		}
		back, err := laneFromToken(tt.token)
		if err != nil || back != tt.lane {
			t.Errorf("laneFromToken(%q) = %q, %v, want %q", tt.token, back, err, tt.lane)
		}
	}
	for _, bad := range []string{"x", "bx!", "b0", "SYSTEM"} {
		if lane, err := laneFromToken(bad); err == nil {
			t.Errorf("laneFromToken(%q) = %q, want an error", bad, lane)
		}
	}
	if got := subject("123", 256); got != "gateway.events.27.123" {
		t.Errorf("subject = %q", got)
	}
}

// validToken reports whether tok is one NATS subject token: not empty,
// printable ASCII without '.', '*', '>' or white space.
func validToken(tok string) bool {
	if tok == "" {
		return false
	}
	for _, c := range []byte(tok) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(".*>", c) >= 0 {
			return false
		}
	}
	return true
}

func FuzzLaneSubject(f *testing.F) {
	for _, tt := range laneTests {
		f.Add(tt.lane, 256)
	}
	f.Add("\x00\xff.>*", 1)
	f.Fuzz(func(t *testing.T, lane string, partitions int) {
		if partitions <= 0 || partitions > 1<<16 {
			partitions = 256
		}
		tok := laneToken(lane)
		if !validToken(tok) {
			t.Fatalf("lane %q: token %q is not a valid subject token", lane, tok)
		}
		subj := subject(lane, partitions)
		parts := strings.Split(subj, ".")
		if len(parts) != 4 || parts[0] != "gateway" || parts[1] != "events" || parts[3] != tok {
			t.Fatalf("lane %q: subject %q is not gateway.events.<p>.<token>", lane, subj)
		}
		if p := partition(lane, partitions); p < 0 || p >= partitions {
			t.Fatalf("lane %q: partition %d of %d", lane, p, partitions)
		}
		back, err := laneOfSubject(subj)
		if err != nil || back != lane {
			t.Fatalf("lane %q: round trip gave %q, %v", lane, back, err)
		}
		// Any token decodes to a lane that encodes back to it, or is refused.
		if l, err := laneFromToken(lane); err == nil && validToken(lane) && laneToken(l) != lane {
			t.Fatalf("token %q decodes to %q, which encodes to %q", lane, l, laneToken(l))
		}
	})
}
