package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/backends"
	"github.com/agentgateway/gateway/internal/queue"
)

// A timeout only suggests a smaller request when the model had started
// answering; with nothing back, the model API is the suspect.
func TestUserErrorTimeoutAdviceFollowsOutput(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantSmaller bool
		want        string
	}{
		{
			name:        "output then timeout",
			err:         &backends.Error{Kind: backends.KindTimeout, ModelOutput: true},
			wantSmaller: true,
			want:        "Timed out",
		},
		{
			name: "no output",
			err:  &backends.Error{Kind: backends.KindTimeout},
			want: "sent nothing back",
		},
		{
			name: "no output, wrapped",
			err:  fmt.Errorf("run: %w", &backends.Error{Kind: backends.KindTimeout}),
			want: "sent nothing back",
		},
		{
			name: "unreachable",
			err:  &backends.Error{Kind: backends.KindUnreachable},
			want: "could not reach the model API",
		},
		{
			name: "auth",
			err:  &backends.Error{Kind: backends.KindAuth, Status: 401},
			want: "credentials",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := userError(queue.Event{}, tt.err)
			if got := strings.Contains(msg, "smaller request"); got != tt.wantSmaller {
				t.Errorf("advises a smaller request = %t, want %t: %q", got, tt.wantSmaller, msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message lacks %q: %q", tt.want, msg)
			}
		})
	}
}
