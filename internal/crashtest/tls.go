package crashtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are a test CA, a server certificate for 127.0.0.1 and a client
// certificate it signed, written as PEM files, with the client's TLS
// configuration (Options.ClientTLS) that trusts the CA and presents the
// client certificate.
type TLSFiles struct {
	// CAFile is the CA certificate: the server's --tls-client-ca-file.
	CAFile string
	// CertFile and KeyFile are the server's certificate and key.
	CertFile, KeyFile string
	// Client trusts CAFile and presents a client certificate whose
	// common name is ClientCN.
	Client *tls.Config
	// ClientCN is the common name of the client certificate.
	ClientCN string
}

// NewTLS writes a fresh CA, server and client certificate into dir.
func NewTLS(t testing.TB, dir, clientCN string) *TLSFiles {
	t.Helper()
	now := time.Now()
	caKey, caDER := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "crashtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil, nil)
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, srvDER := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)
	cliKey, cliDER := newCert(t, &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: clientCN},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}, ca, caKey)

	f := &TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"),
		KeyFile: filepath.Join(dir, "server-key.pem"), ClientCN: clientCN}
	writePEM(t, f.CAFile, "CERTIFICATE", caDER)
	writePEM(t, f.CertFile, "CERTIFICATE", srvDER)
	writePEM(t, f.KeyFile, "EC PRIVATE KEY", marshalKey(t, srvKey))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	f.Client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12,
		Certificates: []tls.Certificate{{Certificate: [][]byte{cliDER}, PrivateKey: cliKey}}}
	return f
}

// newCert makes a key and a certificate of tmpl signed by parent (self
// signed when parent is nil).
func newCert(t testing.TB, tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func marshalKey(t testing.TB, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	b, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
