package agent

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// A prompt given with /plan runs in plan mode whatever PERMISSION_MODE
// says, so its ExitPlanMode is asked about; an approved plan goes on in
// acceptEdits, or in PERMISSION_MODE when that is neither plan nor
// default.
func TestPlanModePerEvent(t *testing.T) {
	plan := backends.Approval{Tool: backends.ToolExitPlanMode}
	for _, tc := range []struct {
		global, event string
		wantNil       bool
		wantMode      string
	}{
		{global: "default", event: "plan", wantMode: "acceptEdits"},
		{global: "plan", wantMode: "acceptEdits"},
		{global: "bypassPermissions", event: "plan", wantMode: "bypassPermissions"},
		{global: "acceptEdits", event: "plan", wantMode: "acceptEdits"},
		{global: "bypassPermissions", wantNil: true},
	} {
		t.Run(tc.global+"/"+tc.event, func(t *testing.T) {
			out := &askingReplier{answer: Decision{Verdict: backends.Verdict{Allow: true, Mode: "acceptEdits"}, By: "42"}}
			r := New(Options{ConfigDir: t.TempDir(), PermissionMode: tc.global}, &backends.Fake{}, nil, out, nil, zerolog.New(zerolog.NewTestWriter(t)))
			e := queue.Event{ID: 1, Kind: queue.KindMessage, ChannelID: "7", Lane: "7", PermissionMode: tc.event}
			approve := r.approver(e, zerolog.New(zerolog.NewTestWriter(t)))
			if (approve == nil) != tc.wantNil {
				t.Fatalf("approver nil = %v, want %v", approve == nil, tc.wantNil)
			}
			if approve == nil {
				return
			}
			if v := approve(context.Background(), plan); !v.Allow || v.Mode != tc.wantMode {
				t.Errorf("verdict %+v, want allow in %s", v, tc.wantMode)
			}
		})
	}
}
