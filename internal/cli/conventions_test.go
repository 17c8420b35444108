package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandPaths lists the arguments that reach every command of the tree,
// the root's included ([]).
func commandPaths(cmd *cobra.Command, prefix []string) [][]string {
	paths := [][]string{prefix}
	for _, sub := range cmd.Commands() {
		path := append(append([]string(nil), prefix...), sub.Name())
		paths = append(paths, commandPaths(sub, path)...)
	}
	return paths
}

func TestEveryCommandsHelpHasExitCodesAndExamples(t *testing.T) {
	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &bytes.Buffer{}})
	paths := commandPaths(root, nil)
	if len(paths) < 16 {
		t.Fatalf("found %d commands, want every one (run, worker, chat, ..., completion's shells): %q", len(paths), paths)
	}
	for _, path := range paths {
		name := strings.Join(append([]string{"gateway"}, path...), " ")
		t.Run(name, func(t *testing.T) {
			code, out, errOut := runCmd(t, append(path, "--help")...)
			if code != exitOK {
				t.Fatalf("exit %d, want 0: %s", code, errOut)
			}
			for _, want := range []string{
				"Exit codes:\n",
				"\n  0  ",
				"\n  2  usage",
				"Examples:\n  $ ",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("--help lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
		// hint is the command whose --help the error points to.
		hint string
	}{
		{"unknown command", []string{"nosuch"}, `unknown command "nosuch" for "gateway"`, "gateway"},
		{"unknown command, suggested", []string{"rnu"}, "Did you mean this?\n\trun", "gateway"},
		{"unknown subcommand", []string{"config", "psuh"}, `unknown command "psuh" for "gateway config"` + "\n\nDid you mean this?\n\tpush", "gateway config"},
		{"unknown shell", []string{"completion", "tcsh"}, `unknown command "tcsh" for "gateway completion"`, "gateway completion"},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus", "gateway run"},
		{"unknown flag on the root", []string{"--bogus"}, "unknown flag: --bogus", "gateway"},
		{"unknown shorthand", []string{"doctor", "-x"}, "unknown shorthand flag: 'x' in -x", "gateway doctor"},
		{"bad flag value", []string{"healthcheck", "--timeout", "soon"}, `invalid argument "soon" for "--timeout" flag`, "gateway healthcheck"},
		{"bad boolean", []string{"sessions", "--json=maybe"}, `invalid argument "maybe" for "--json" flag`, "gateway sessions"},
		{"flag without its value", []string{"chat", "-m"}, "flag needs an argument: 'm' in -m", "gateway chat"},
		{"no time to wait", []string{"healthcheck", "--timeout", "0s"}, "--timeout 0s", "gateway healthcheck"},
		{"argument to version", []string{"version", "extra"}, `unknown command "extra" for "gateway version"`, "gateway version"},
		{"argument to doctor", []string{"doctor", "extra"}, `unknown command "extra" for "gateway doctor"`, "gateway doctor"},
		{"argument to run", []string{"run", "now"}, `unknown command "now" for "gateway run"`, "gateway run"},
		{"argument to a shell", []string{"completion", "bash", "extra"}, `unknown command "extra" for "gateway completion bash"`, "gateway completion bash"},
		{"prompt as an argument", []string{"chat", "hello"}, `gateway chat takes no arguments, got "hello": give one prompt with -m`, "gateway chat"},
		{"two dirs to init", []string{"init", "a", "b"}, "accepts at most 1 arg(s), received 2", "gateway init"},
		{"no dir to push", []string{"config", "push"}, "gateway config push takes one argument, DIR", "gateway config push"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, tc.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
			if hint := "Run '" + tc.hint + " --help' for usage."; !strings.Contains(errOut, hint) {
				t.Errorf("stderr lacks %q:\n%s", hint, errOut)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing: a usage error is not a result", out)
			}
		})
	}
}

// TestNoArgumentsPrintsHelp: `gateway` alone shows what there is to run,
// on stdout, and succeeds.
func TestNoArgumentsPrintsHelp(t *testing.T) {
	code, out, errOut := runCmd(t)
	if code != exitOK || !strings.Contains(out, "Available Commands:") || errOut != "" {
		t.Errorf("exit %d, stdout %q, stderr %q: want 0 and the help on stdout", code, out, errOut)
	}
}

// TestVersionFlagHasNoShorthand: -v means --verbose (chat's), never
// --version: the root has --version alone.
func TestVersionFlagHasNoShorthand(t *testing.T) {
	code, out, errOut := runCmd(t, "--version")
	if code != exitOK || out != "gateway version "+version()+"\n" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCmd(t, "-v")
	if code != exitUsage || out != "" || !strings.Contains(errOut, "unknown shorthand flag: 'v' in -v") {
		t.Errorf("-v: exit %d, stdout %q, stderr %q; want %d and an unknown flag", code, out, errOut, exitUsage)
	}

	root := newRootCmd(streams{in: strings.NewReader(""), out: &bytes.Buffer{}, errOut: &bytes.Buffer{}})
	if f := root.Flags().Lookup("version"); f == nil || f.Shorthand != "" {
		t.Errorf("the root's --version flag = %+v, want one without a shorthand", f)
	}
	chat, _, err := root.Find([]string{"chat"})
	if err != nil {
		t.Fatal(err)
	}
	if f := chat.Flags().ShorthandLookup("v"); f == nil || f.Name != "verbose" {
		t.Errorf("chat -v = %+v, want --verbose", f)
	}
}
