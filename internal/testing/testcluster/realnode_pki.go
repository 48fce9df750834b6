package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// issueNodeCerts writes the real node's certificates, signed by the cluster CA:
// a serving certificate for the node IP (the API server verifies it when it calls
// the kubelet for logs and exec) and a client certificate for
// CN=system:node:<name>, O=system:nodes.
func issueNodeCerts(p *pki, paths nodePaths, name, nodeIP string) error {
	ca, err := tls.LoadX509KeyPair(p.caCert, p.caKey)
	if err != nil {
		return fmt.Errorf("node certificates: cluster CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return fmt.Errorf("node certificates: cluster CA: %w", err)
	}
	signer, ok := ca.PrivateKey.(crypto.Signer)
	if !ok {
		return fmt.Errorf("node certificates: cluster CA key is a %T, not a signer", ca.PrivateKey)
	}
	ip := net.ParseIP(nodeIP)
	if ip == nil {
		return fmt.Errorf("node certificates: node IP %q is not an IP address", nodeIP)
	}
	if err := os.MkdirAll(paths.kubeletCertDir, 0o700); err != nil {
		return fmt.Errorf("node certificates: %w", err)
	}
	now := time.Now().Add(-time.Hour)
	leaves := []struct {
		tmpl      x509.Certificate
		cert, key string
	}{
		{
			tmpl: x509.Certificate{
				Subject:     pkix.Name{CommonName: name},
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
				IPAddresses: []net.IP{ip},
				DNSNames:    []string{name},
			},
			cert: paths.servingCert, key: paths.servingKey,
		},
		{
			tmpl: x509.Certificate{
				Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
			},
			cert: paths.clientCert, key: paths.clientKey,
		},
	}
	w := &pki{dir: paths.kubeletCertDir}
	for _, l := range leaves {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("node certificates: %s key: %w", l.tmpl.Subject.CommonName, err)
		}
		tmpl := l.tmpl
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = now, now.Add(10*365*24*time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, &tmpl, caCert, &key.PublicKey, signer)
		if err != nil {
			return fmt.Errorf("node certificates: %s: %w", tmpl.Subject.CommonName, err)
		}
		certPath, keyPath, _, _, err := w.write(baseName(l.cert), der, key)
		if err != nil {
			return err
		}
		if certPath != l.cert || keyPath != l.key {
			return fmt.Errorf("node certificates: wrote %s and %s, want %s and %s", certPath, keyPath, l.cert, l.key)
		}
	}
	return nil
}

// baseName is a certificate file's name without directory and ".crt".
func baseName(certPath string) string {
	return strings.TrimSuffix(filepath.Base(certPath), ".crt")
}
