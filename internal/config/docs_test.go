package config

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/readmetest"
)

var (
	updateREADME     = flag.Bool("update-readme", false, "rewrite the settings table of docs/configuration.md from docs")
	updateEnvExample = flag.Bool("update-env-example", false, "rewrite .env.example from docs")
)

// Every variable the gateway reads is documented exactly once, and every
// name the reference documents is one the gateway reads.
func TestDocsCoverEverySetting(t *testing.T) {
	seen := map[string]int{}
	for i, d := range docs {
		if len(d.Names) == 0 || strings.TrimSpace(d.Default) == "" || strings.TrimSpace(d.Meaning) == "" {
			t.Errorf("docs[%d] (%v) lacks names, a default or a meaning", i, d.Names)
		}
		for _, n := range append(slices.Clone(d.Names), d.Also...) {
			seen[n]++
		}
	}
	pattern := WebhookSecretPrefix + "<NAME>" + FileSuffix
	for n, count := range seen {
		switch {
		case n != pattern && !slices.Contains(knownNames, n):
			t.Errorf("docs name %s, which is not a setting the gateway reads", n)
		case count > 1:
			t.Errorf("docs name %s %d times", n, count)
		}
	}
	for _, n := range knownNames {
		if seen[n] == 0 {
			t.Errorf("%s has no doc: add it to docs in docs.go (then go test ./internal/config -update-readme -update-env-example)", n)
		}
	}
	if seen[pattern] == 0 {
		t.Errorf("docs do not say that webhook secrets may be given as files (%s)", pattern)
	}
}

// The default a row shows is the one Load applies, so that changing one in
// defaults.go without the docs fails.
func TestDocsShowTheDefaults(t *testing.T) {
	for _, d := range docs {
		for _, n := range d.Names {
			if def := defaults[n]; def != "" && !strings.Contains(d.Default, "`"+def+"`") {
				t.Errorf("%s defaults to %q, but its doc says %q", n, def, d.Default)
			}
		}
	}
}

// A name a row covers without naming it in its first column is still
// named in its meaning, so the README mentions it.
func TestDocsMentionTheirOtherNames(t *testing.T) {
	for _, d := range docs {
		for _, n := range d.Also {
			short := "`_" + strings.TrimPrefix(n, EnvActions+"_") + "`"
			if !strings.Contains(d.Meaning, "`"+n+"`") && !strings.Contains(d.Meaning, short) {
				t.Errorf("the meaning of %v does not mention %s", d.Names, n)
			}
		}
	}
}

// The settings table in docs/configuration.md is made from docs: go test
// ./internal/config -update-readme rewrites it.
func TestREADMESettingsTable(t *testing.T) {
	readmetest.Section(t, "../../docs/configuration.md",
		"<!-- settings table: made by go test ./internal/config -update-readme -->\n", "<!-- end of settings table -->",
		settingsTable(), *updateREADME, "go test ./internal/config -update-readme")
}

func settingsTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, d := range docs {
		names := make([]string, len(d.Names))
		for i, n := range d.Names {
			names[i] = "`" + n + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", strings.Join(names, ", "), cell(d.Default), cell(d.Meaning))
	}
	return b.String()
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// .env.example at the repository's root is CommentedEnv(nil): go test
// ./internal/config -update-env-example rewrites it.
func TestEnvExample(t *testing.T) {
	const path = "../../.env.example"
	want := CommentedEnv(nil)
	got, err := os.ReadFile(path)
	if err == nil && string(got) == want {
		return
	}
	if *updateEnvExample {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Errorf(".env.example is out of date; run go test ./internal/config -update-env-example")
}

var envLine = regexp.MustCompile(`(?m)^#?([A-Z][A-Z0-9_]*)=(.*)$`)

// The commented .env sets nothing; uncommented line by line it sets every
// setting to its default. Either way it loads without a problem or an
// unknown name, so every line it writes is a real setting with a valid
// value.
func TestCommentedEnvLoads(t *testing.T) {
	commented := CommentedEnv(nil)
	want := mustLoad(t, nil, "", 0)

	got := mustLoad(t, nil, commented, 0)
	if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
		t.Errorf("the commented .env changes the configuration (-want +got):\n%s", diff)
	}

	uncommented := envLine.ReplaceAllString(commented, "$1=$2")
	got = mustLoad(t, nil, uncommented, 0)
	if diff := cmp.Diff(want, got, cmpConfig); diff != "" {
		t.Errorf("the defaults the .env shows are not the defaults (-want +got):\n%s", diff)
	}
	if u := got.UnknownSettings(); len(u) > 0 {
		t.Errorf("the .env names unknown settings: %v", u)
	}

	var names []string
	for _, m := range envLine.FindAllStringSubmatch(commented, -1) {
		names = append(names, m[1])
		if isSecret(m[1]) && m[2] != "" {
			t.Errorf("secret %s has a value in the template: %q", m[1], m[2])
		}
	}
	for _, k := range knownNames {
		if !slices.Contains(names, k) {
			t.Errorf("the .env has no line for %s", k)
		}
	}
}

func TestCommentedEnvSetsValues(t *testing.T) {
	for _, dir := range []string{"/srv/gateway/config", "/srv/my gateway/config#1", `/srv/$HOME/"x"\y`} {
		t.Run(dir, func(t *testing.T) {
			env := CommentedEnv(map[string]string{EnvConfigDir: dir})
			if n := strings.Count(env, "\n"+EnvConfigDir+"="); n != 1 {
				t.Fatalf("%s is set on %d lines, want 1:\n%s", EnvConfigDir, n, env)
			}
			cfg := mustLoad(t, nil, env, 0)
			if cfg.ConfigDir != dir {
				t.Errorf("ConfigDir = %q, want %q", cfg.ConfigDir, dir)
			}
			if got := cfg.Source(EnvConfigDir); got != SourceEnvFile {
				t.Errorf("Source(%s) = %q, want %q", EnvConfigDir, got, SourceEnvFile)
			}
		})
	}
}

func TestCommentedEnvDescribesDefaults(t *testing.T) {
	env := CommentedEnv(nil)
	for _, want := range []string{
		"# the bot's token. Never passed to the agent CLI. Required for run.\n#DISCORD_BOT_TOKEN=\n",
		"# model passed to the CLI (--model). Default: CLI default.\n#AGENT_MODEL=\n",
		"#AGENT_MAX_TURNS=25\n",
		"#DISCORD_ACTIONS_DEFER_MAX_SECONDS=1800\n#DISCORD_ACTIONS_DEFER_MAX_PENDING=5\n",
		"#DISCORD_ACTIONS_MODERATION=false\n",
		"#ADMIN_TOKEN=\n",
	} {
		if !strings.Contains(env, want) {
			t.Errorf("the .env lacks %q", want)
		}
	}
	if strings.Contains(env, "<NAME>") {
		t.Errorf("the .env has a line for a pattern, not a name")
	}
	for i, l := range strings.Split(env, "\n") {
		if len(l) > 80 && !envLine.MatchString(l) {
			t.Errorf("line %d is %d bytes long: %q", i+1, len(l), l)
		}
	}
}
