package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/agentgateway/gateway/internal/config"
	"github.com/agentgateway/gateway/internal/kvpersona"
	"github.com/agentgateway/gateway/internal/natstest"
	"github.com/agentgateway/gateway/internal/persona"
)

// `gateway config push DIR` uploads DIR's persona files with the
// gateway's NATS settings and prints the files it changed; a second push
// changes nothing; a file too large is refused, named; without NATS_URL it
// is a configuration error.
func TestConfigPush(t *testing.T) {
	srv := natstest.Start(t, t.TempDir())
	env := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(env, []byte(config.EnvConfigDir+"="+t.TempDir()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(config.EnvNATSURL, srv.ClientURL())
	dir := t.TempDir()
	for name, content := range map[string]string{"soul.md": "# Soul\n", "identity.md": "# Identity\n", "memory.md": "# Memory\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	push := func() (string, string, error) {
		var out, errOut bytes.Buffer
		err := runConfigPush(context.Background(), configPushOptions{io: streams{out: &out, errOut: &errOut}, envFile: env, dir: dir})
		return out.String(), errOut.String(), err
	}

	out, _, err := push()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("updated identity.md\nupdated soul.md\n", out); diff != "" {
		t.Errorf("first push printed (-want +got):\n%s", diff)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(context.Background(), kvpersona.PersonaBucket)
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(context.Background(), "soul.md"); err != nil || string(e.Value()) != "# Soul\n" {
		t.Errorf("soul.md in the bucket: %v", err)
	}

	out, errOut, err := push()
	if err != nil || out != "" || !strings.Contains(errOut, "nothing changed") {
		t.Errorf("second push: out %q, err out %q, %v; want nothing printed but that nothing changed", out, errOut, err)
	}

	if err := os.Remove(filepath.Join(dir, "identity.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "user.md"), bytes.Repeat([]byte("x"), persona.MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err = push()
	if err == nil || !strings.Contains(err.Error(), "user.md") || out != "" {
		t.Errorf("push with a file too large: out %q, %v; want an error naming user.md and nothing changed", out, err)
	}
	if _, err := kv.Get(context.Background(), "identity.md"); err != nil {
		t.Errorf("a refused push deleted identity.md: %v", err)
	}

	// Through the command line: DIR is the one argument.
	if err := os.Remove(filepath.Join(dir, "user.md")); err != nil {
		t.Fatal(err)
	}
	var cmdOut bytes.Buffer
	parent := &cobra.Command{Use: "config", SilenceUsage: true, SilenceErrors: true}
	parent.PersistentFlags().String("env-file", "", "")
	parent.AddCommand(newConfigPushCmd(streams{out: &cmdOut, errOut: &bytes.Buffer{}}))
	parent.SetArgs([]string{"push", dir, "--env-file", env})
	if err := parent.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("deleted identity.md\n", cmdOut.String()); diff != "" {
		t.Errorf("gateway config push printed (-want +got):\n%s", diff)
	}

	t.Setenv(config.EnvNATSURL, "")
	_, _, err = push()
	var cfgErr *configError
	if !errors.As(err, &cfgErr) || !strings.Contains(err.Error(), config.EnvNATSURL) {
		t.Errorf("push without NATS_URL: %v; want a configuration error naming %s", err, config.EnvNATSURL)
	}
}
