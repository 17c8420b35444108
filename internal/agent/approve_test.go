package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// askingReplier is a Replier that can ask for approvals and records what
// it was asked.
type askingReplier struct {
	replies
	asked  []backends.Approval
	answer Decision
}

func (a *askingReplier) Approve(_ context.Context, _ queue.Event, ap backends.Approval) Decision {
	a.asked = append(a.asked, ap)
	return a.answer
}

func TestApprovalsAskThePromptsAuthorAndFollowThePolicyOtherwise(t *testing.T) {
	bash := backends.Approval{Tool: "Bash", Input: json.RawMessage(`{"command":"rm -rf build","description":"clean"}`)}
	for _, tc := range []struct {
		name      string
		mode      string
		allowed   bool // SCHEDULED_TOOLS_POLICY=allow
		kind      queue.Kind
		wantNil   bool
		wantAsked bool
		wantAllow bool
	}{
		{"bypass never asks", "bypassPermissions", false, queue.KindMessage, true, false, false},
		{"a prompt asks its author", "default", false, queue.KindMessage, false, true, true},
		{"a cron job is denied by default", "acceptEdits", false, queue.KindCron, false, false, false},
		{"a webhook is allowed by policy", "default", true, queue.KindWebhook, false, false, true},
		{"plan asks too", "plan", false, queue.KindMessage, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := &askingReplier{answer: Decision{Verdict: backends.Verdict{Allow: true}, By: "42"}}
			r := New(Options{ConfigDir: t.TempDir(), PermissionMode: tc.mode, ScheduledToolsAllowed: tc.allowed}, &backends.Fake{}, nil, out, nil, zerolog.New(zerolog.NewTestWriter(t)))
			e := queue.Event{ID: 1, Kind: tc.kind, ChannelID: "7", Lane: "7"}
			approve := r.approver(e, zerolog.New(zerolog.NewTestWriter(t)))
			if (approve == nil) != tc.wantNil {
				t.Fatalf("approver nil = %v, want %v", approve == nil, tc.wantNil)
			}
			if approve == nil {
				return
			}
			v := approve(context.Background(), bash)
			if (len(out.asked) == 1) != tc.wantAsked || v.Allow != tc.wantAllow {
				t.Errorf("asked %d times, verdict %+v", len(out.asked), v)
			}
			if !v.Allow && !strings.Contains(v.Message, "SCHEDULED_TOOLS_POLICY") {
				t.Errorf("denial message %q does not say why", v.Message)
			}
		})
	}
}

func TestToolSummary(t *testing.T) {
	for _, tc := range []struct{ input, want string }{
		{`{"command":"go test\n  ./...","description":"x"}`, "go test ./..."},
		{`{"file_path":"/w/main.go","content":"package main"}`, "/w/main.go"},
		{`{"query":"x"}`, `{"query":"x"}`},
		{`{"command":"` + strings.Repeat("a", 50) + `"}`, strings.Repeat("a", 20) + "…"},
	} {
		if got := ToolSummary(backends.Approval{Input: json.RawMessage(tc.input)}, 20); got != tc.want {
			t.Errorf("ToolSummary(%s) = %q, want %q", tc.input, got, tc.want)
		}
	}
}
