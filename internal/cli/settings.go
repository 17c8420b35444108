package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/config"
)

type configOptions struct {
	io      streams
	envFile string
	json    bool
}

func newConfigCmd(io streams) *cobra.Command {
	opts := configOptions{io: io}
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Print the effective settings and where each came from",
		Long: `config prints every setting as NAME=value, secrets masked, followed by
where its value came from: the environment, the .env file, a file
(NAME_FILE), or the default. A value that is invalid shows the default that
replaces it, marked as such, and config exits 2 listing the problems, as
run would. config push uploads the persona files for the workers.

Exit codes:
  0  every setting is valid
  1  the settings could not be written out
  2  usage; or a value is invalid (the problems follow the settings), or
     the .env cannot be read`,
		Example: `  $ gateway config
  $ gateway config --json
  $ gateway config --env-file /etc/gateway/.env | grep ^AGENT_`,
		Args: subcommandArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runConfig(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the settings as JSON")
	cmd.AddCommand(newConfigPushCmd(io))
	return cmd
}

func runConfig(opts configOptions) error {
	cfg, loadErr := loadConfig(opts.envFile, forDoctor)
	if cfg == nil {
		return loadErr
	}
	settings := cfg.Settings()
	envFile := envFileInUse(opts.envFile)
	if opts.json {
		out := struct {
			EnvFile  string           `json:"env_file"`
			Settings []config.Setting `json:"settings"`
		}{envFile, settings}
		enc := json.NewEncoder(opts.io.out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		if err := printSettings(opts.io.out, envFile, settings); err != nil {
			return err
		}
	}
	for _, u := range cfg.UnknownSettings() {
		fmt.Fprintln(opts.io.errOut, "warning:", u.String())
	}
	return loadErr
}

// printSettings writes one NAME=value line per setting with its source as
// a comment, the comments aligned, so that the output still reads as a
// .env file.
func printSettings(w io.Writer, envFile string, settings []config.Setting) error {
	const most = 48 // a longer line does not push every comment out
	width := 0
	for _, s := range settings {
		if n := len(s.Name) + 1 + len(s.Value); n > width && n <= most {
			width = n
		}
	}
	var b strings.Builder
	if envFile == "" {
		envFile = "none"
	}
	fmt.Fprintf(&b, "# sources: environment, .env (%s), file (NAME_FILE), default\n", envFile)
	for _, s := range settings {
		line := s.Name + "=" + s.Value
		fmt.Fprintf(&b, "%-*s  # %s\n", width, line, s.Source)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// envFileInUse is the absolute path of the .env file Load reads, or ""
// when there is none (the default ./.env may be absent).
func envFileInUse(flag string) string {
	path := flag
	if path == "" {
		path = config.DefaultEnvFile
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return ""
		}
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
