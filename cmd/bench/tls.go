package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// budgetIdleTLSRSSKB is the idle RSS budget with Discord reached over TLS:
// the system CA pool and the TLS state cost memory the plain figure does
// not show.
const budgetIdleTLSRSSKB = 15 * 1024

// systemCertDirs are the directories crypto/x509 reads on Linux when
// SSL_CERT_DIR is unset (root_linux.go, certDirectories); setting
// SSL_CERT_DIR replaces the list, so the bench names them again beside
// its own CA's directory.
var systemCertDirs = []string{"/etc/ssl/certs", "/etc/pki/tls/certs"}

// benchCA is a certificate authority made for one bench run, and a server
// certificate it signed for 127.0.0.1, so the fake Discord can serve TLS
// that the gateway verifies like Discord's.
type benchCA struct {
	// Dir holds the CA's certificate (ca.pem), for SSL_CERT_DIR.
	Dir    string
	Server tls.Certificate
}

// newBenchCA makes the CA and the server certificate and writes the CA's
// certificate into a new directory under parent.
func newBenchCA(parent string) (*benchCA, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ca key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gateway bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("ca certificate: %w", err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("server key: %w", err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "bench-ca-")
	if err != nil {
		return nil, err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	if err := os.WriteFile(filepath.Join(dir, "ca.pem"), caPEM, 0o644); err != nil {
		return nil, fmt.Errorf("write ca: %w", err)
	}
	return &benchCA{
		Dir:    dir,
		Server: tls.Certificate{Certificate: [][]byte{srvDER}, PrivateKey: srvKey},
	}, nil
}

// certEnv makes the gateway trust the bench CA besides the system's:
// SSL_CERT_DIR lists the system directories Go reads by default and the
// CA's directory. SSL_CERT_FILE stays unset (gatewayEnv passes none), so
// the default bundle file (/etc/ssl/certs/ca-certificates.crt on Debian)
// is read too, as on a machine without either variable.
func (ca *benchCA) certEnv() []string {
	return []string{"SSL_CERT_DIR=" + strings.Join(append(append([]string(nil), systemCertDirs...), ca.Dir), ":")}
}

// idleTLSBudgetRow is the budget table's row for the idle RSS over TLS:
// the median of the runs, 10 s after READY.
func idleTLSBudgetRow(f footprint) string {
	idle := medianInt(f.IdleTLSKB)
	return fmt.Sprintf("| idle RSS over TLS <= %d MB | %.1f MB (median, 10 s after READY; system CA pool and the bench's CA) | %s |",
		budgetIdleTLSRSSKB/1024, float64(idle)/1024, verdict(idle <= budgetIdleTLSRSSKB))
}
