package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// tlsFiles serves the API's certificate and, for mutual TLS, the client
// CAs, from files that reload replaces without a restart.
type tlsFiles struct {
	certFile, keyFile, clientCAFile string

	mu       sync.RWMutex
	cert     *tls.Certificate
	clientCA *x509.CertPool
}

// newTLSFiles loads the files once; a file that cannot be read or parsed
// is an error naming it.
func newTLSFiles(certFile, keyFile, clientCAFile string) (*tlsFiles, error) {
	f := &tlsFiles{certFile: certFile, keyFile: keyFile, clientCAFile: clientCAFile}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

// reload reads the files again. On error the previous ones stay in use.
func (f *tlsFiles) reload() error {
	cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
	if err != nil {
		return fmt.Errorf("tls-cert-file %s / tls-key-file %s: %w", f.certFile, f.keyFile, err)
	}
	var pool *x509.CertPool
	if f.clientCAFile != "" {
		pem, err := os.ReadFile(f.clientCAFile)
		if err != nil {
			return fmt.Errorf("tls-client-ca-file: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tls-client-ca-file %s: no PEM certificate in it", f.clientCAFile)
		}
	}
	f.mu.Lock()
	f.cert, f.clientCA = &cert, pool
	f.mu.Unlock()
	return nil
}

// config is the listener's TLS configuration: TLS 1.2 or newer, the
// current certificate at every handshake and, with client CAs, a verified
// client certificate required.
func (f *tlsFiles) config() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		f.mu.RLock()
		cert, pool := f.cert, f.clientCA
		f.mu.RUnlock()
		if cert == nil {
			return nil, errors.New("no certificate loaded")
		}
		c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}}
		if pool != nil {
			c.ClientCAs, c.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		return c, nil
	}
	return base
}
