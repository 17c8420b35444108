package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentgateway/gateway/internal/fakediscord"
)

func TestFakeDiscordOverTLSIsTrustedWithTheBenchCA(t *testing.T) {
	t.Parallel()
	ca, err := newBenchCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fd := fakediscord.NewTLS(ca.Server)
	defer fd.Close()
	if !strings.HasPrefix(fd.APIBaseURL(), "https://") || !strings.HasPrefix(fd.GatewayURL(), "wss://") {
		t.Fatalf("URLs %q, %q: want https:// and wss://", fd.APIBaseURL(), fd.GatewayURL())
	}
	pemBytes, err := os.ReadFile(filepath.Join(ca.Dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("ca.pem holds no certificate")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(fd.APIBaseURL() + "/gateway")
	if err != nil {
		t.Fatalf("GET over TLS trusting the bench CA: %v", err)
	}
	resp.Body.Close()
}

func TestCertEnvNamesTheSystemDirectoriesAndTheCA(t *testing.T) {
	t.Parallel()
	ca := &benchCA{Dir: "/tmp/bench-ca-1"}
	want := "SSL_CERT_DIR=/etc/ssl/certs:/etc/pki/tls/certs:/tmp/bench-ca-1"
	if got := ca.certEnv(); len(got) != 1 || got[0] != want {
		t.Errorf("certEnv() = %q, want [%q]", got, want)
	}
}
