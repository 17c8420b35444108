package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	gateway "github.com/agentgateway/gateway"
	"github.com/agentgateway/gateway/internal/atomicfile"
	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/persona"
)

type initOptions struct {
	io streams
	// dir is the CONFIG_DIR to create, from the argument; empty means
	// envDir, then the default.
	dir string
	// envDir is CONFIG_DIR from the environment.
	envDir string
	// envFile is the gateway's .env (--env-file): where every other
	// command reads it, and so where init writes it. Empty means ./.env.
	envFile string
	// force replaces an existing .env.
	force bool
}

func newInitCmd(io streams) *cobra.Command {
	opts := initOptions{io: io}
	cmd := &cobra.Command{
		Use:   "init [dir]",
		Short: "Create CONFIG_DIR with the example persona and a commented .env",
		Long: `init creates CONFIG_DIR with the example persona: dir when given,
else the folder the CONFIG_DIR environment variable names, else ./config.
It writes the .env the next command will read: ./.env in the current
folder, or the file --env-file names (the same flag every other command
reads it with). The .env lists every setting, commented out, with its
default and what it does; secrets are left empty. With dir or CONFIG_DIR,
the .env sets CONFIG_DIR to the folder it filled. It ends with the exact
command to run next.

It never overwrites a persona file that exists, and refuses to overwrite
an existing .env unless --force is given.

Exit codes:
  0  created (persona files that existed are kept)
  1  the .env exists (--force replaces it), or a file could not be written
  2  usage: more than one dir, an unknown flag`,
		Example: `  $ gateway init
  $ gateway init ~/agent --env-file ~/agent/.env
  $ gateway init --force`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			if len(args) == 1 {
				opts.dir = args[0]
			}
			// As every other command reads it. A .env's CONFIG_DIR does not
			// count: init writes the .env (or refuses to replace it).
			opts.envDir = os.Getenv(config.EnvConfigDir)
			return runInit(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.force, "force", false, "overwrite an existing .env")
	return cmd
}

func runInit(opts initOptions) error {
	dir, named := opts.dir, opts.dir != "" || opts.envDir != ""
	if dir == "" {
		dir = opts.envDir
	}
	if dir == "" {
		dir = config.Default(config.EnvConfigDir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("config dir: %w", err)
	}
	// The .env goes where the next command reads it: --env-file, else
	// ./.env, whatever folder dir is (a .env next to /srv/gw/config would
	// be read by no command run from here).
	envPath := opts.envFile
	if envPath == "" {
		envPath = config.DefaultEnvFile
	}
	// Only a named directory is written into the .env: the default
	// resolves the same way without it, and a CONFIG_DIR of this shell
	// may not be set when the .env is read next.
	set := map[string]string{}
	if named {
		if strings.ContainsAny(dir, "'\r\n") {
			return fmt.Errorf("config dir %q: a .env file cannot hold a path with a single quote or a line break", dir)
		}
		set[config.EnvConfigDir] = dir
	}
	if _, err := os.Lstat(envPath); err == nil && !opts.force {
		return fmt.Errorf("%s exists: not overwritten (--force replaces it, --env-file writes another)", envPath)
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create config dir: %w", err)
	}
	created, err := writeExamplePersona(dir)
	if err != nil {
		return err
	}
	// Whatever boot.md lists and the example does not carry (memory.md).
	res, err := persona.Bootstrap(dir, zerolog.Nop())
	if err != nil {
		return fmt.Errorf("bootstrap config dir: %w", err)
	}
	created = append(created, res.Created...)
	for _, name := range created {
		fmt.Fprintln(opts.io.out, "created", filepath.Join(dir, name))
	}

	env := []byte(config.CommentedEnv(set))
	if opts.force {
		err = atomicfile.Write(envPath, env, 0o600)
	} else {
		var made bool
		made, err = atomicfile.Create(envPath, env, 0o600)
		if err == nil && !made {
			err = fmt.Errorf("%s appeared meanwhile: not overwritten", envPath)
		}
	}
	if err != nil {
		return fmt.Errorf("write .env: %w", err)
	}
	fmt.Fprintln(opts.io.out, "wrote", envPath)
	fmt.Fprint(opts.io.out, nextSteps(envPath, opts.envFile != ""))
	return nil
}

// nextSteps is what init says to do after it: which secrets to fill in,
// where, and the exact command that reads that .env.
func nextSteps(envPath string, named bool) string {
	backend := os.Getenv(config.EnvBackend)
	if backend == "" {
		backend = config.Default(config.EnvBackend)
	}
	secrets := []string{"DISCORD_BOT_TOKEN"}
	if creds := config.Credentials(strings.ToLower(backend)); len(creds) > 0 {
		secrets = append(secrets, creds[0])
	}
	doctor := "gateway doctor"
	if named {
		abs, err := filepath.Abs(envPath)
		if err != nil {
			abs = envPath
		}
		doctor = "gateway --env-file " + shellQuote(abs) + " doctor"
	}
	return fmt.Sprintf("next: set %s in %s, then run:\n  %s\n", strings.Join(secrets, " and "), envPath, doctor)
}

// shellQuote quotes s for a POSIX shell when it holds anything but plain
// path characters.
func shellQuote(s string) string {
	plain := strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '_' || r == '-' || r == '~' || r == '+' || r == ':' ||
			'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9')
	}) < 0
	if plain && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeExamplePersona creates each file of the example persona in dir
// that is not there yet, and returns the names it created.
func writeExamplePersona(dir string) ([]string, error) {
	const root = "config"
	entries, err := fs.ReadDir(gateway.ExamplePersona, root)
	if err != nil {
		return nil, fmt.Errorf("read example persona: %w", err)
	}
	var created []string
	var errs []error
	for _, e := range entries {
		data, err := fs.ReadFile(gateway.ExamplePersona, path.Join(root, e.Name()))
		if err != nil {
			errs = append(errs, fmt.Errorf("read example persona: %w", err))
			continue
		}
		made, err := atomicfile.Create(filepath.Join(dir, e.Name()), data, 0o600)
		switch {
		case err != nil:
			errs = append(errs, err)
		case made:
			created = append(created, e.Name())
		}
	}
	return created, errors.Join(errs...)
}
