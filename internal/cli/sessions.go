package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/project"
	"github.com/agentgateway/gateway/internal/session"
	"github.com/agentgateway/gateway/internal/threads"
)

type sessionsOptions struct {
	io      streams
	envFile string
	json    bool
}

func newSessionsCmd(io streams) *cobra.Command {
	opts := sessionsOptions{io: io}
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List the agent sessions the gateway's channels and threads continue",
		Long: `sessions lists the sessions the gateway knows from CONFIG_DIR/sessions.json:
the channel (or thread, with the channel it was opened in), its project
relative to PROJECTS_ROOT, the CLI that made the session, the session's id
and when it was last used, newest first. It only reads, and works while the
gateway runs. To continue a session in a terminal, run the command /status
shows in its channel.

Exit codes:
  0  listed (also when there is none yet)
  1  CONFIG_DIR does not exist or cannot be read, or sessions.json or
     threads.json could not be read
  2  usage; or the .env cannot be read`,
		Example: `  $ gateway sessions
  $ gateway sessions --json | jq -r '.[].session'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.envFile, _ = cmd.Flags().GetString("env-file")
			return runSessions(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print the sessions as JSON")
	return cmd
}

// sessionRow is one session as `gateway sessions` shows it.
type sessionRow struct {
	Channel string `json:"channel"`
	// Thread is set for a thread the gateway opened; Parent is the channel
	// it was opened in.
	Thread bool   `json:"thread"`
	Parent string `json:"parent,omitempty"`
	// Project is relative to PROJECTS_ROOT; empty for the default
	// directory.
	Project  string    `json:"project,omitempty"`
	Backend  string    `json:"backend"`
	Session  string    `json:"session"`
	LastUsed time.Time `json:"last_used"`
}

func runSessions(opts sessionsOptions) error {
	cfg, err := loadConfig(opts.envFile, forDoctor)
	if cfg == nil {
		return err
	}
	// A CONFIG_DIR that is not there is a wrong setting or .env far more
	// often than a gateway that never ran: say which folder was read.
	if _, err := os.Stat(cfg.ConfigDir); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("CONFIG_DIR %s does not exist: no gateway has run with it; check CONFIG_DIR (gateway config shows where it comes from)", cfg.ConfigDir)
	}
	rows, err := readSessions(cfg)
	if err != nil {
		return err
	}
	if opts.json {
		if rows == nil {
			rows = []sessionRow{}
		}
		enc := json.NewEncoder(opts.io.out)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return printSessions(opts.io.out, rows)
}

// readSessions reads sessions.json and threads.json as they are on disk,
// without the stores' Open: that moves an unreadable file aside, and this
// command must change nothing under a running gateway (whose writes are
// atomic renames, so a read sees a whole file).
func readSessions(cfg *config.Config) ([]sessionRow, error) {
	var sf struct {
		Channels map[string]session.Binding  `json:"channels"`
		Settings map[string]session.Settings `json:"settings"`
	}
	if err := readJSON(filepath.Join(cfg.ConfigDir, session.FileName), &sf); err != nil {
		return nil, err
	}
	var tf struct {
		Threads map[string]threads.Thread `json:"threads"`
	}
	if err := readJSON(filepath.Join(cfg.ConfigDir, threads.FileName), &tf); err != nil {
		return nil, err
	}
	var rows []sessionRow
	for ch, b := range sf.Channels {
		r := sessionRow{Channel: ch, Backend: b.Backend, Session: b.SessionID, LastUsed: b.Updated}
		if r.Backend == "" {
			r.Backend = cfg.Backend
		}
		if th, ok := tf.Threads[ch]; ok {
			r.Thread, r.Parent = true, th.Parent
		}
		if p := sf.Settings[ch].Project; p != "" {
			r.Project = project.Show(cfg.ProjectsRoot, p)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if c := b.LastUsed.Compare(a.LastUsed); c != 0 {
			return c < 0
		}
		return compareStrings(a.Channel, b.Channel) < 0
	})
	return rows, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readJSON decodes the file at path into v; a missing file leaves v as it
// is.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return nil
}

// printSessions writes rows as a table.
func printSessions(w io.Writer, rows []sessionRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "No sessions yet: a channel gets one with its first prompt.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tTHREAD\tPROJECT\tCLI\tSESSION\tLAST USED")
	for _, r := range rows {
		thread := "no"
		if r.Thread {
			thread = "in " + r.Parent
		}
		proj := r.Project
		if proj == "" {
			proj = "(default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Channel, thread, proj, r.Backend, r.Session, r.LastUsed.Local().Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}
