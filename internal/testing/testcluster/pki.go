package testcluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the paths of the certificates and keys a cluster runs with. All keys are
// ECDSA P-256: generating them takes microseconds, unlike RSA.
type pki struct {
	dir string

	caCert, caKey         string
	apiserverCert         string
	apiserverKey          string
	saPub, saKey          string
	adminCert, adminKey   string
	kcmCert, kcmKey       string
	schedCert, schedKey   string
	kubeletClientCert     string
	kubeletClientKey      string
	kwokServingCert       string
	kwokServingKey        string
	caPEM                 []byte
	adminCertPEM, adminPK []byte
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// newPKI writes a fresh CA and every certificate the control plane needs into dir.
// apiserverIPs are more addresses for the API server's serving certificate (the real
// node's pod gateway, where its pods reach the API server).
func newPKI(dir string, apiserverIPs ...net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	p := &pki{dir: dir}
	now := time.Now().Add(-time.Hour)
	notAfter := now.Add(10 * 365 * 24 * time.Hour)
	ca, err := p.newCA(now, notAfter)
	if err != nil {
		return nil, err
	}
	for _, l := range p.leaves(apiserverIPs) {
		if err := p.newLeaf(ca, l, now, notAfter); err != nil {
			return nil, err
		}
	}
	if err := p.newServiceAccountKey(); err != nil {
		return nil, err
	}
	return p, nil
}

// newCA makes and writes the CA (ca.crt, ca.key).
func (p *pki) newCA(now, notAfter time.Time) (keyPair, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("pki: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "pcsync-testcluster-ca"},
		NotBefore:             now,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return keyPair{}, fmt.Errorf("pki: CA certificate: %w", err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return keyPair{}, fmt.Errorf("pki: CA certificate: %w", err)
	}
	p.caCert, p.caKey, p.caPEM, _, err = p.write("ca", caDER, caKey)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{cert: caCert, key: caKey}, nil
}

// leaf is a certificate the CA signs, and where p keeps its files' paths.
type leaf struct {
	name   string
	cn     string
	orgs   []string
	server bool
	client bool
	ips    []net.IP
	dns    []string
	cert   *string
	key    *string
}

// leaves are the control plane's certificates.
func (p *pki) leaves(apiserverIPs []net.IP) []leaf {
	return []leaf{
		{
			name: "apiserver", cn: "kube-apiserver", server: true,
			ips: append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, apiserverIPs...),
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			cert: &p.apiserverCert, key: &p.apiserverKey,
		},
		{name: "admin", cn: "pcsync-testcluster-admin", orgs: []string{"system:masters"}, client: true,
			cert: &p.adminCert, key: &p.adminKey},
		{name: "kube-controller-manager", cn: "system:kube-controller-manager", client: true,
			cert: &p.kcmCert, key: &p.kcmKey},
		{name: "kube-scheduler", cn: "system:kube-scheduler", client: true,
			cert: &p.schedCert, key: &p.schedKey},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client",
			orgs: []string{"system:masters"}, client: true,
			cert: &p.kubeletClientCert, key: &p.kubeletClientKey},
		{name: "kwok-serving", cn: "kwok", server: true,
			ips: []net.IP{net.ParseIP("127.0.0.1")}, dns: []string{"localhost"},
			cert: &p.kwokServingCert, key: &p.kwokServingKey},
	}
}

// newLeaf makes l, signed by ca, and writes it (<name>.crt, <name>.key).
func (p *pki) newLeaf(ca keyPair, l leaf, now, notAfter time.Time) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: %s key: %w", l.name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: l.cn, Organization: l.orgs},
		NotBefore:    now,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  l.ips,
		DNSNames:     l.dns,
	}
	if l.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("pki: %s certificate: %w", l.name, err)
	}
	certPath, keyPath, certPEM, keyPEM, err := p.write(l.name, der, key)
	if err != nil {
		return err
	}
	*l.cert, *l.key = certPath, keyPath
	if l.name == "admin" {
		p.adminCertPEM, p.adminPK = certPEM, keyPEM
	}
	return nil
}

// newServiceAccountKey makes and writes the service-account token signing
// key pair (sa.key, sa.pub).
func (p *pki) newServiceAccountKey() error {
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	saKeyDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return fmt.Errorf("pki: service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return fmt.Errorf("pki: service-account public key: %w", err)
	}
	p.saKey = filepath.Join(p.dir, "sa.key")
	p.saPub = filepath.Join(p.dir, "sa.pub")
	if err := os.WriteFile(p.saKey, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saKeyDER}), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}), 0o600); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return nil
}

// write stores a certificate and its key as PEM files <name>.crt and <name>.key.
func (p *pki) write(name string, der []byte, key *ecdsa.PrivateKey) (certPath, keyPath string, certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", nil, nil, fmt.Errorf("pki: %s key: %w", name, err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	certPath = filepath.Join(p.dir, name+".crt")
	keyPath = filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certPath, certPEM, 0o600); err != nil {
		return "", "", nil, nil, fmt.Errorf("pki: %w", err)
	}
	if err := os.WriteFile(keyPath, keyPEM, 0o600); err != nil {
		return "", "", nil, nil, fmt.Errorf("pki: %w", err)
	}
	return certPath, keyPath, certPEM, keyPEM, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		// crypto/rand does not fail on Linux; a constant serial is still valid.
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}
