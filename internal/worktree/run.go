package worktree

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentgateway/gateway/internal/proc"
)

// Runner runs one git command in dir, with env added to the environment
// git always gets, and returns its standard output. A command that ran
// and exited non-zero returns its output so far and an *ExitError.
type Runner interface {
	Run(ctx context.Context, dir string, env []string, args ...string) ([]byte, error)
}

// ExitError is a git command that exited non-zero.
type ExitError struct {
	// Command is git's subcommand ("merge-tree").
	Command string
	Code    int
	// Stderr is the end of what git wrote to stderr, server paths replaced
	// (see Options.Root).
	Stderr string
}

func (e *ExitError) Error() string {
	if e.Stderr == "" {
		return fmt.Sprintf("git %s: exit status %d", e.Command, e.Code)
	}
	return fmt.Sprintf("git %s: exit status %d: %s", e.Command, e.Code, e.Stderr)
}

// exitCode is err's exit code when git ran and failed, else -1.
func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return -1
}

// ErrOutputTooLarge is returned when git wrote more than Options.MaxOutput
// to stdout; what was read is returned with it.
var ErrOutputTooLarge = errors.New("git's output is larger than the gateway reads")

// procRunner runs git through proc: its own process group, killed with it
// when ctx ends or the timeout passes, as the agent's user when one is set.
type procRunner struct {
	user      *User
	timeout   time.Duration
	maxOutput int64
	owner     string
	scrub     func(string) string
}

// gitConfig is given to every command: hooks are the repository's own
// business, not the gateway's (a commit the gateway makes before a merge
// must not run a linter that can fail it, nor a hook hang a merge), and
// output is never paged or coloured.
var gitConfig = []string{"-c", "core.hooksPath=/dev/null", "-c", "core.pager=cat", "-c", "color.ui=false"}

func (r procRunner) Run(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	spec := proc.Spec{
		Path:      "git",
		Args:      append(append([]string{}, gitConfig...), args...),
		Dir:       dir,
		Env:       append(r.environ(), env...),
		Grace:     2 * time.Second,
		TailBytes: 4 << 10,
		Owner:     r.owner,
	}
	if r.user != nil {
		c := r.user.Credential
		c.Groups = append([]uint32(nil), c.Groups...)
		spec.Credential = &c
	}
	name := subcommand(args)
	p, err := proc.Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("git %s: %s", name, r.scrub(err.Error()))
	}
	out, readErr := readAtMost(p.Stdout(), r.maxOutput)
	exit, err := p.Wait()
	switch {
	case err != nil:
		return out, fmt.Errorf("git %s: %w", name, err)
	case exit.Code != 0:
		return out, &ExitError{Command: name, Code: exit.Code, Stderr: r.scrub(strings.TrimSpace(p.StderrTail()))}
	case errors.Is(readErr, ErrOutputTooLarge):
		return out, fmt.Errorf("git %s: %w", name, readErr)
	case readErr != nil:
		return out, fmt.Errorf("git %s: read its output: %w", name, readErr)
	}
	return out, nil
}

// environ is what every git command starts from: as the agent user, that
// user's HOME (its ~/.gitconfig, never the gateway's) and nothing of the
// gateway's environment but PATH; as the gateway's own user, its HOME and
// the variables that point git at its configuration and identity.
func (r procRunner) environ() []string {
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
		// status and diff must not rewrite the index behind a running
		// turn's back.
		"GIT_OPTIONAL_LOCKS=0",
	}
	if r.user != nil {
		if r.user.Home != "" {
			env = append(env, "HOME="+r.user.Home)
		}
		return append(env, "USER="+r.user.Name, "LOGNAME="+r.user.Name)
	}
	for _, name := range []string{"HOME", "USER", "LOGNAME", "XDG_CONFIG_HOME",
		"GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM",
		"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"} {
		if v, ok := os.LookupEnv(name); ok {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// subcommand is the git subcommand in args, for errors and logs.
func subcommand(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-c" || a == "-C":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return "?"
}

// readAtMost reads r to its end, keeping at most max bytes; past that the
// rest is read and dropped (so git does not block on a full pipe) and
// ErrOutputTooLarge is returned with what was kept.
func readAtMost(r io.Reader, max int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, max))
	if err != nil {
		return data, err
	}
	n, err := io.Copy(io.Discard, r)
	if err != nil {
		return data, err
	}
	if n > 0 {
		return data, ErrOutputTooLarge
	}
	return data, nil
}

// scrubber replaces the server's paths in git's messages with names a
// user may see: root (PROJECTS_ROOT) as $PROJECTS_ROOT, the agent's home
// as ~.
func scrubber(root string, user *User) func(string) string {
	var pairs []string
	add := func(path, name string) {
		if path == "" || path == "/" {
			return
		}
		pairs = append(pairs, filepath.Clean(path), name)
		if real, err := filepath.EvalSymlinks(path); err == nil && real != filepath.Clean(path) {
			pairs = append(pairs, real, name)
		}
	}
	add(root, "$PROJECTS_ROOT")
	if user != nil {
		add(user.Home, "~")
	}
	if len(pairs) == 0 {
		return func(s string) string { return s }
	}
	rep := strings.NewReplacer(pairs...)
	return rep.Replace
}
