package discord

import "testing"

// A question or plan left open is closed as unanswered, an approval as
// denied; both are approval chunks, so a restart finds them.
func TestStaleNotice(t *testing.T) {
	for _, tc := range []struct {
		chunk int
		want  string
	}{
		{approvalChunkBase - 1, StaleApprovalNotice},
		{approvalChunkBase - 5000, StaleApprovalNotice},
		{askChunkBase - 1, StaleQuestionNotice},
	} {
		if !ApprovalChunk(tc.chunk) {
			t.Errorf("ApprovalChunk(%d) = false", tc.chunk)
		}
		if got := StaleNotice(tc.chunk); got != tc.want {
			t.Errorf("StaleNotice(%d) = %q, want %q", tc.chunk, got, tc.want)
		}
	}
}
