package backends

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Options configures a backend adapter.
type Options struct {
	// Binary is the CLI to run; empty means the CLI's usual name on PATH.
	Binary string
	// Env is the environment the CLI starts from, e.g. os.Environ() plus the
	// credentials from the gateway's config. Adapters pass on only the
	// variables named by their allowlist (see FilterEnv).
	Env []string
	// KillGrace is how long the CLI gets between SIGTERM and SIGKILL.
	KillGrace time.Duration
	// Log receives the adapter's diagnostics (skipped stream lines and the
	// like). The zero Logger discards them.
	Log zerolog.Logger
	// RunAs, if not nil, is the user every CLI the adapter starts runs as,
	// with HOME, USER and LOGNAME set to that user's (AGENT_USER). Files
	// the adapter writes for a run are shared with the user's primary
	// group. Nil runs the CLIs as the gateway's user.
	RunAs *RunAs
	// Owner marks every CLI process the adapter starts, and their
	// descendants (proc.Spec.Owner), so that a gateway killed mid-turn
	// leaves nothing the next start cannot find.
	Owner string
	// Command is the agent's command line for the acp backend
	// (ACP_COMMAND, split into words); empty means ACP_COMMAND in Env.
	// Other backends ignore it.
	Command []string
	// Warm configures the adapters' long-running modes (claude's
	// stream-json, codex's app-server, ACP, pi's RPC mode) and the warm
	// pool that keeps their processes; the zero value keeps none warm.
	// Capabilities.Warm says which mode an adapter has.
	Warm WarmOptions
}

// Factory builds a backend from options.
type Factory func(Options) Backend

var registry = struct {
	sync.Mutex
	m map[string]Factory
}{m: map[string]Factory{}}

// Register adds a backend under name. Registering a name twice panics: it is
// a programming error.
func Register(name string, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic("backends: duplicate registration of " + name)
	}
	registry.m[name] = f
}

// New builds the backend registered as name.
func New(name string, opts Options) (Backend, error) {
	registry.Lock()
	f, ok := registry.m[name]
	registry.Unlock()
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (known: %v)", name, Names())
	}
	return f(opts), nil
}

// Names lists the registered backends, sorted.
func Names() []string {
	registry.Lock()
	defer registry.Unlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
