package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// As root, claude refuses the default bypassPermissions unless IS_SANDBOX
// is exactly 1. Without PERMISSION_MODE the gateway then picks acceptEdits
// (which asks before commands) instead of starting into a refusal; a
// PERMISSION_MODE the operator set is kept whatever it costs.
func TestRootWithoutPermissionModePicksAcceptEdits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		euid       int
		env        map[string]string
		wantMode   string
		wantSource string
		refuses    bool
	}{
		{"root, nothing set", 0, nil, "acceptEdits", SourceRootDefault, false},
		{"root, IS_SANDBOX=yes", 0, map[string]string{EnvIsSandbox: "yes"}, "acceptEdits", SourceRootDefault, false},
		{"root in a sandbox", 0, map[string]string{EnvIsSandbox: "1"}, "bypassPermissions", SourceDefault, false},
		{"root, explicit bypass", 0, map[string]string{EnvPermissionMode: "bypassPermissions"}, "bypassPermissions", SourceEnvironment, true},
		{"root, explicit plan", 0, map[string]string{EnvPermissionMode: "plan"}, "plan", SourceEnvironment, false},
		{"root with AGENT_USER", 0, map[string]string{EnvAgentUser: "agent"}, "bypassPermissions", SourceDefault, false},
		{"root with codex", 0, map[string]string{EnvBackend: "codex"}, "bypassPermissions", SourceDefault, false},
		{"a user", 1000, nil, "bypassPermissions", SourceDefault, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := loadAs(t, tt.euid, tt.env, "")
			if err != nil {
				t.Fatal(err)
			}
			got := []any{cfg.PermissionMode, cfg.Source(EnvPermissionMode), cfg.RootRefusesBypass()}
			want := []any{tt.wantMode, tt.wantSource, tt.refuses}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("mode, source, refuses (-want +got):\n%s", d)
			}
			note := cfg.RootDefaultNote()
			if (note != "") != (tt.wantSource == SourceRootDefault) {
				t.Errorf("RootDefaultNote() = %q, want one only when the root default was picked", note)
			}
			var notes int
			for _, w := range cfg.Warnings() {
				if w == note {
					notes++
				}
			}
			if note != "" && notes != 1 {
				t.Errorf("Warnings() = %q, want the note once", cfg.Warnings())
			}
		})
	}
}

// The advice names IS_SANDBOX's current value and where it came from: an
// operator who wrote IS_SANDBOX=1 into .env while the environment says
// IS_SANDBOX=yes is told which one claude sees, instead of being told
// again to set IS_SANDBOX=1.
func TestRootAdviceNamesIsSandboxAndItsSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		env    map[string]string
		dotenv string
		want   []string
		never  []string
	}{
		{"unset", nil, "", []string{"set IS_SANDBOX=1 (exactly 1)"}, []string{"IS_SANDBOX is"}},
		{"environment wins over .env", map[string]string{EnvIsSandbox: "yes"}, "IS_SANDBOX=1\n",
			[]string{`IS_SANDBOX is "yes" (from the environment, which wins over IS_SANDBOX=1 in .env)`, "claude accepts only 1", "unset IS_SANDBOX in the environment"},
			[]string{"set IS_SANDBOX=1 (exactly 1)"}},
		{"from .env", nil, "IS_SANDBOX=true\n",
			[]string{`IS_SANDBOX is "true" (from the .env file)`, "claude accepts only 1", "set IS_SANDBOX=1 (exactly 1)"}, nil},
		{"from the environment", map[string]string{EnvIsSandbox: "yes"}, "",
			[]string{`IS_SANDBOX is "yes" (from the environment)`, "set IS_SANDBOX=1 (exactly 1)"}, []string{"wins over"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{EnvPermissionMode: "bypassPermissions"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := loadAs(t, 0, env, tt.dotenv)
			if err != nil {
				t.Fatal(err)
			}
			advice := cfg.RootBypassAdvice()
			if !strings.HasPrefix(advice, RootBypassRefusal) {
				t.Errorf("advice %q does not start with %q", advice, RootBypassRefusal)
			}
			for _, w := range tt.want {
				if !strings.Contains(advice, w) {
					t.Errorf("advice lacks %q:\n%s", w, advice)
				}
			}
			for _, n := range tt.never {
				if strings.Contains(advice, n) {
					t.Errorf("advice has %q:\n%s", n, advice)
				}
			}
			// The same facts reach the note of the root default.
			delete(env, EnvPermissionMode)
			cfg, err = loadAs(t, 0, env, tt.dotenv)
			if err != nil {
				t.Fatal(err)
			}
			if len(tt.want) > 0 && strings.HasPrefix(tt.want[0], "IS_SANDBOX is") && !strings.Contains(cfg.RootDefaultNote(), tt.want[0]) {
				t.Errorf("RootDefaultNote() lacks %q:\n%s", tt.want[0], cfg.RootDefaultNote())
			}
		})
	}
}
