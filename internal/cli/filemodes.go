package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/dirlock"
	"github.com/agentgateway/gateway/internal/discord"
	"github.com/agentgateway/gateway/internal/session"
)

// stateFiles are the files the gateway keeps in CONFIG_DIR for itself,
// which it writes 0600.
var stateFiles = []string{session.FileName, discord.StateFile, dirlock.FileName}

// fileModeChecks warns, naming each file and the command that fixes it,
// when other users than the gateway's can read what holds its secrets or
// state: the .env file, a secret file (NAME_FILE) of the bot token or a
// webhook, a state file in CONFIG_DIR (any group or other permission), and
// CONFIG_DIR itself when others may list or enter it while it holds state
// files. The modes are what the kernel checks; ACLs are not considered.
func fileModeChecks(cfg *config.Config, envFile string) []check {
	var out []check
	warn := func(format string, args ...any) {
		out = append(out, check{Name: "file-modes", Warning: true, Detail: fmt.Sprintf(format, args...)})
	}
	if envFile == "" {
		envFile = config.DefaultEnvFile
	}
	if fi, err := os.Stat(envFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
		warn("%s is %s: other users can read the secrets in it; fix: chmod 600 %s",
			envFile, modeString(fi.Mode()), envFile)
	}
	files := cfg.PrivateFiles()
	names := make([]string, 0, len(files))
	for name := range files {
		// The agent CLI is given its model key anyway.
		if !config.IsModelCredential(name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		path := files[name]
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
			warn("%s (%s%s) is %s: other users can read %s; fix: chmod 600 %s",
				path, name, config.FileSuffix, modeString(fi.Mode()), name, path)
		}
	}

	dir := cfg.ConfigDir
	var present []string
	for _, name := range stateFiles {
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path)
		if err != nil {
			continue
		}
		present = append(present, name)
		if fi.Mode().Perm()&0o077 != 0 {
			warn("%s is %s: other users can read the gateway's state; fix: chmod 600 %s",
				path, modeString(fi.Mode()), path)
		}
	}
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() && fi.Mode().Perm()&0o005 != 0 && len(present) > 0 {
		fix := "chmod 700 " + dir
		if cfg.AgentUser != "" {
			// The agent user reaches CONFIG_DIR through its group.
			fix = "chmod o-rwx " + dir
		}
		warn("CONFIG_DIR %s is %s: every user may look into it, where the gateway keeps %s; fix: %s",
			dir, modeString(fi.Mode()), strings.Join(present, ", "), fix)
	}
	return out
}

// modeString shows permission bits as chmod takes them (0644).
func modeString(m os.FileMode) string { return fmt.Sprintf("%04o", m.Perm()) }
