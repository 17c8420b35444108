package config

import (
	"strings"

	"github.com/spf13/viper"
)

// Where a setting's value came from, as Source reports it.
const (
	SourceDefault     = "default"
	SourceEnvironment = "environment"
	SourceEnvFile     = ".env"
	// SourceFile is a secret read from the file its NAME_FILE names.
	SourceFile = "file"
	// SourceRootDefault is PERMISSION_MODE's acceptEdits, picked because it
	// was not set and claude refuses the default bypassPermissions as root.
	SourceRootDefault = "default as root"
)

// Setting is one setting as `gateway config` shows it: its value as
// Redacted prints it, secrets masked, and where the value came from.
type Setting struct {
	Name   string `json:"name"`
	Value  string `json:"value"`
	Source string `json:"source"`
}

// Settings returns every setting Redacted shows, in the same order, each
// with its Source.
func (c Config) Settings() []Setting {
	var out []Setting
	for _, s := range c.settings() {
		out = append(out, Setting{Name: s.name, Value: s.value, Source: c.Source(s.name)})
	}
	return out
}

// Source says where the value of the named setting came from: the
// environment, the .env file, a file (NAME_FILE), or the default. A value
// that was rejected is replaced by the default, and its source says so:
// "default (invalid in environment)".
func (c Config) Source(name string) string {
	if s, ok := c.sources[name]; ok {
		return s
	}
	return SourceDefault
}

// envFileValues returns the names the .env file read into v gives a
// non-empty value, upper case as in the file, with that value. It must be
// called before the environment is layered on.
func envFileValues(v *viper.Viper) map[string]string {
	m := make(map[string]string)
	for _, k := range v.AllKeys() {
		if val := strings.TrimSpace(v.GetString(k)); val != "" && v.InConfig(k) {
			m[strings.ToUpper(k)] = val
		}
	}
	return m
}

// sources works out where each setting cfg shows came from: a non-empty
// environment variable wins over a non-empty .env entry (the precedence
// Load applies), a secret read from a file is SourceFile, and a setting in
// bad has its default whatever was given.
func sources(cfg *Config, env, inFile map[string]string, bad map[string]bool) map[string]string {
	m := make(map[string]string)
	for _, s := range cfg.settings() {
		where := SourceDefault
		switch {
		case cfg.secretFiles[s.name] != "":
			where = SourceFile
		case strings.TrimSpace(env[s.name]) != "":
			where = SourceEnvironment
		case inFile[s.name] != "":
			where = SourceEnvFile
		}
		if bad[s.name] {
			if where == SourceDefault {
				// A secret whose file could not be used.
				where = s.name + FileSuffix
			}
			where = SourceDefault + " (invalid in " + where + ")"
		}
		if where != SourceDefault {
			m[s.name] = where
		}
	}
	return m
}
