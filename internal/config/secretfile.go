package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
)

// FileSuffix turns a secret's name into the name of the variable that
// holds the path of a file with its value: DISCORD_BOT_TOKEN_FILE, as
// systemd credentials ($CREDENTIALS_DIRECTORY) and container secrets
// (/run/secrets) provide them.
const FileSuffix = "_FILE"

// WebhookSecretPrefix starts the name of every variable a webhook's
// Secret-Env may name; NAME_FILE works for each of them too.
const WebhookSecretPrefix = "WEBHOOK_"

// secretNames are the secrets that may be given as files besides the
// webhook secrets (WEBHOOK_*): the bot token, the model credentials, the
// NATS token and the transcription key.
var secretNames = []string{
	EnvDiscordToken,
	EnvAnthropicAPIKey,
	EnvAnthropicAuthToken,
	EnvOpenAIAPIKey,
	EnvGeminiAPIKey,
	EnvGoogleAPIKey,
	EnvNATSToken,
	EnvTranscribeAPIKey,
}

// maxSecretFile bounds what a secret file may hold, so that a path to the
// wrong file (a log, a device) cannot stall or flood the gateway.
const maxSecretFile = 64 << 10

// secretFile is a secret read from the file that NAME_FILE names.
type secretFile struct {
	name, path, value string
}

// fileSecretNames returns the secrets that may be given as files: the
// fixed ones, then every WEBHOOK_* variable (other than WEBHOOK_ADDR) whose
// NAME_FILE is among names, sorted.
func fileSecretNames(names []string) []string {
	out := slices.Clone(secretNames)
	var hooks []string
	for _, n := range names {
		n = strings.ToUpper(n)
		base, ok := strings.CutSuffix(n, FileSuffix)
		if ok && strings.HasPrefix(base, WebhookSecretPrefix) && len(base) > len(WebhookSecretPrefix) &&
			base != EnvWebhookAddr && !slices.Contains(hooks, base) {
			hooks = append(hooks, base)
		}
	}
	slices.Sort(hooks)
	return append(out, hooks...)
}

// readSecretFiles resolves NAME_FILE for each of names, looking both NAME
// and NAME_FILE up in lookup (the environment, then .env). It returns the
// secrets read and a problem for each file that cannot be used or that
// disagrees with NAME set as well. A problem's message names the variable
// and the path, never what the file holds. bad gets the names whose value
// is unknown because of a problem.
func readSecretFiles(names []string, lookup func(string) (string, bool), bad map[string]bool) ([]secretFile, []error) {
	var files []secretFile
	var problems []error
	for _, name := range names {
		fileVar := name + FileSuffix
		path, ok := lookup(fileVar)
		path = strings.TrimSpace(path)
		if !ok || path == "" {
			continue
		}
		value, err := readSecretFile(path)
		if err != nil {
			problems = append(problems, varErrorf(fileVar, "%s: %v", fileVar, err))
			bad[name] = true
			continue
		}
		if direct, ok := lookup(name); ok && strings.TrimSpace(direct) != strings.TrimSpace(value) {
			problems = append(problems, varErrorf(name,
				"%s and %s (%s) are both set, to different values: unset one", name, fileVar, path))
			bad[name] = true
			continue
		}
		files = append(files, secretFile{name: name, path: path, value: value})
	}
	return files, problems
}

// readSecretFile returns what the regular file at path holds, without
// trailing white space (the newline `echo` and editors add). It must hold
// one line, and not be empty.
func readSecretFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, reason(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, reason(err))
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSecretFile+1))
	if err != nil {
		return "", fmt.Errorf("cannot read %s: %w", path, reason(err))
	}
	if len(b) > maxSecretFile {
		return "", fmt.Errorf("%s is larger than %d KiB: it must hold the secret alone", path, maxSecretFile>>10)
	}
	value := strings.TrimRight(string(b), " \t\r\n")
	switch {
	case strings.TrimSpace(value) == "":
		return "", fmt.Errorf("%s is empty", path)
	case strings.ContainsAny(value, "\r\n"):
		return "", fmt.Errorf("%s holds more than one line: it must hold the secret alone", path)
	}
	return value, nil
}

// reason strips the path an *fs.PathError repeats.
func reason(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// isSecretFileVar reports whether name is NAME_FILE for one of the fixed
// secrets: such a name is a setting, and is not handed to agent CLIs as a
// provider variable (the value read from the file is).
func isSecretFileVar(name string) bool {
	base, ok := strings.CutSuffix(name, FileSuffix)
	return ok && slices.Contains(secretNames, base)
}

// SecretFiles returns the secrets that were read from files, each name
// (DISCORD_BOT_TOKEN) with the path its NAME_FILE gave.
func (c *Config) SecretFiles() map[string]string { return maps.Clone(c.secretFiles) }

// PrivateFiles are the files holding secrets the agent must never read,
// keyed like SecretFiles by their setting's name without FileSuffix: the
// secret files and the NATS credentials file (NATS_CREDS_FILE), whose keys
// sign in to the gateway's event store.
func (c *Config) PrivateFiles() map[string]string {
	files := maps.Clone(c.secretFiles)
	if files == nil {
		files = map[string]string{}
	}
	if c.NATSCredsFile != "" {
		files[strings.TrimSuffix(EnvNATSCredsFile, FileSuffix)] = c.NATSCredsFile
	}
	return files
}

// IsModelCredential reports whether name is one of the model providers'
// credentials, which the agent CLI is given anyway (BackendEnv).
func IsModelCredential(name string) bool {
	return name != EnvDiscordToken && name != EnvNATSToken && slices.Contains(secretNames, name)
}
