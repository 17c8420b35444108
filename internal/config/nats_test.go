package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The NATS settings: what Load makes of them, and the problems it names.
func TestNATSSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds := filepath.Join(dir, "gw.creds")
	token := filepath.Join(dir, "nats-token")
	for path, content := range map[string]string{creds: "-----BEGIN NATS USER JWT-----\n", token: "s3cret-nats-token\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	type want struct {
		URLs       []string
		Creds      string
		Token      string
		Replicas   int
		Partitions int
	}
	for _, tc := range []struct {
		name     string
		env      map[string]string
		want     want
		problems map[string]string // variable -> a part of its message
	}{
		{name: "unset: the embedded inbox", want: want{Replicas: 1, Partitions: 256}},
		{
			name: "a cluster with a token file",
			env:  map[string]string{EnvNATSURL: "nats://a:4222, tls://b:4222", EnvNATSToken + FileSuffix: token, EnvNATSReplicas: "3", EnvNATSPartitions: "64"},
			want: want{URLs: []string{"nats://a:4222", "tls://b:4222"}, Token: "s3cret-nats-token", Replicas: 3, Partitions: 64},
		},
		{
			name: "websocket with a creds file",
			env:  map[string]string{EnvNATSURL: "wss://nats.example.com", EnvNATSCredsFile: creds},
			want: want{URLs: []string{"wss://nats.example.com"}, Creds: creds, Replicas: 1, Partitions: 256},
		},
		{
			name:     "not a NATS URL, password hidden",
			env:      map[string]string{EnvNATSURL: "nats://ok:4222,http://user:pw@x:4222"},
			want:     want{Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSURL: `"http://<redacted>@x:4222" is not a nats://, tls://, ws:// or wss:// URL`},
		},
		{
			name:     "no host",
			env:      map[string]string{EnvNATSURL: "nats://:4222"},
			want:     want{Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSURL: "is not a nats://"},
		},
		{
			name:     "two replicas",
			env:      map[string]string{EnvNATSURL: "nats://a", EnvNATSReplicas: "2"},
			want:     want{URLs: []string{"nats://a"}, Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSReplicas: `"2" is not 1, 3 or 5`},
		},
		{
			name:     "too many partitions",
			env:      map[string]string{EnvNATSURL: "nats://a", EnvNATSPartitions: "100000"},
			want:     want{URLs: []string{"nats://a"}, Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSPartitions: "more than 4096"},
		},
		{
			name:     "no turns without workers",
			env:      map[string]string{EnvMaxConcurrent: "0"},
			want:     want{Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvMaxConcurrent: "nothing would ever run"},
		},
		{
			name:     "an ack wait too short for progress reports",
			env:      map[string]string{EnvNATSURL: "nats://a", EnvNATSAckWait: "1s"},
			want:     want{URLs: []string{"nats://a"}, Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSAckWait: "under 3s"},
		},
		{
			name:     "creds and token",
			env:      map[string]string{EnvNATSURL: "nats://a", EnvNATSCredsFile: creds, EnvNATSToken: "tok"},
			want:     want{URLs: []string{"nats://a"}, Token: "tok", Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSCredsFile: "both set"},
		},
		{
			name:     "a creds file that is not there",
			env:      map[string]string{EnvNATSURL: "nats://a", EnvNATSCredsFile: filepath.Join(dir, "missing.creds")},
			want:     want{URLs: []string{"nats://a"}, Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSCredsFile: "cannot read"},
		},
		{
			name:     "a token without a server",
			env:      map[string]string{EnvNATSToken: "tok"},
			want:     want{Token: "tok", Replicas: 1, Partitions: 256},
			problems: map[string]string{EnvNATSURL: "NATS_URL is not set"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var environ []string
			for k, v := range tc.env {
				environ = append(environ, k+"="+v)
			}
			empty := filepath.Join(t.TempDir(), ".env")
			if err := os.WriteFile(empty, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(LoadOptions{EnvFile: empty, Environ: environ})
			got := want{URLs: cfg.NATSURLs, Creds: cfg.NATSCredsFile, Token: cfg.NATSToken, Replicas: cfg.NATSReplicas, Partitions: cfg.NATSPartitions}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("settings (-want +got):\n%s", diff)
			}
			gotProblems := map[string]string{}
			if err != nil {
				for _, p := range validationProblems(t, err) {
					gotProblems[p.Var] = p.Msg
				}
			}
			for v, part := range tc.problems {
				if !strings.Contains(gotProblems[v], part) {
					t.Errorf("problem with %s = %q, want it to say %q", v, gotProblems[v], part)
				}
			}
			for v, msg := range gotProblems {
				if _, ok := tc.problems[v]; !ok {
					t.Errorf("unexpected problem with %s: %s", v, msg)
				}
				if strings.Contains(msg, "s3cret") || strings.Contains(msg, ":pw@") {
					t.Errorf("a problem shows a secret: %s", msg)
				}
			}
			shown := cfg.Redacted()
			if strings.Contains(shown, "s3cret") || strings.Contains(shown, "tok\n") {
				t.Errorf("Redacted shows the NATS token:\n%s", shown)
			}
		})
	}
}

// The NATS token is the gateway's, never handed to the agent CLI as a
// model credential.
func TestNATSTokenIsNotAModelCredential(t *testing.T) {
	if IsModelCredential(EnvNATSToken) {
		t.Error("IsModelCredential(NATS_TOKEN) = true, want false")
	}
}

// The NATS credentials file is kept from the agent like the secret files:
// the start check, doctor and the file guard read PrivateFiles.
func TestPrivateFilesHoldTheNATSCreds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	creds := filepath.Join(dir, "gateway.creds")
	if err := os.WriteFile(creds, []byte("-----BEGIN NATS USER JWT-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(LoadOptions{Environ: []string{EnvConfigDir + "=" + dir, EnvNATSURL + "=nats://127.0.0.1:4222", EnvNATSCredsFile + "=" + creds}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.PrivateFiles()["NATS_CREDS"]; got != creds {
		t.Errorf("PrivateFiles = %v, want NATS_CREDS at %s", c.PrivateFiles(), creds)
	}
	if _, ok := c.SecretFiles()["NATS_CREDS"]; ok {
		t.Error("the creds file is among SecretFiles, whose values are secrets read from files")
	}
}
