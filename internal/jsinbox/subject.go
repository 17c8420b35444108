package jsinbox

import (
	"encoding/base32"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/agentgateway/gateway/internal/queue"
)

// subjectPrefix is the first two tokens of every event's subject:
// gateway.events.<partition>.<lane>.
const subjectPrefix = "gateway.events."

// laneEncoding writes lanes that are neither snowflakes nor "system" as
// subject tokens: upper-case base32 without padding has no '.', '*', '>'
// or white space.
var laneEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// encodedMark starts an encoded lane's token. It is lower case, so an
// encoded token (b + upper case and digits 2-7) is never all digits and
// never "system": the three kinds of token cannot be confused.
const encodedMark = "b"

// partition is the lane's partition: fnv32a(lane) mod partitions.
func partition(lane string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(lane))
	return int(h.Sum32() % uint32(partitions))
}

// laneToken is the lane as one subject token.
func laneToken(lane string) string {
	if lane == queue.SystemLane || isSnowflake(lane) {
		return lane
	}
	return encodedMark + laneEncoding.EncodeToString([]byte(lane))
}

// laneFromToken reverses laneToken.
func laneFromToken(tok string) (string, error) {
	if tok == queue.SystemLane || isSnowflake(tok) {
		return tok, nil
	}
	enc, ok := strings.CutPrefix(tok, encodedMark)
	if !ok {
		return "", fmt.Errorf("lane token %q is neither a snowflake, %q nor encoded", tok, queue.SystemLane)
	}
	b, err := laneEncoding.DecodeString(enc)
	if err != nil {
		return "", fmt.Errorf("lane token %q: %w", tok, err)
	}
	return string(b), nil
}

// isSnowflake reports whether s is a Discord id: decimal digits that fit a
// uint64, written without a leading zero.
func isSnowflake(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}

// subject is where an event of lane is published.
func subject(lane string, partitions int) string {
	return subjectPrefix + strconv.Itoa(partition(lane, partitions)) + "." + laneToken(lane)
}

// laneOfSubject is the lane a subject carries.
func laneOfSubject(subj string) (string, error) {
	rest, ok := strings.CutPrefix(subj, subjectPrefix)
	if !ok {
		return "", fmt.Errorf("subject %q is not an event's", subj)
	}
	_, tok, ok := strings.Cut(rest, ".")
	if !ok {
		return "", fmt.Errorf("subject %q has no lane", subj)
	}
	return laneFromToken(tok)
}
