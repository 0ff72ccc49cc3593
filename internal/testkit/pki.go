package testkit

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

// CA is a test certificate authority: it issues server and client certificates for
// TLS tests.
type CA struct {
	// CertPEM is the CA's certificate (what a peer trusts).
	CertPEM []byte
	// Pool holds the CA's certificate.
	Pool *x509.CertPool

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Leaf is a certificate the CA issued, with its key.
type Leaf struct {
	CertPEM, KeyPEM []byte
	// TLS is the pair for a tls.Config.
	TLS tls.Certificate
}

// NewCA makes a CA named name, valid for a day.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Pool: pool, cert: cert, key: key}
}

// Server issues a server certificate for 127.0.0.1, ::1 and the given DNS names.
func (ca *CA) Server(tb testing.TB, dnsNames ...string) Leaf {
	tb.Helper()
	return ca.issue(tb, "server", x509.ExtKeyUsageServerAuth, dnsNames)
}

// Client issues a client certificate named cn.
func (ca *CA) Client(tb testing.TB, cn string) Leaf {
	tb.Helper()
	return ca.issue(tb, cn, x509.ExtKeyUsageClientAuth, nil)
}

func (ca *CA) issue(tb testing.TB, cn string, usage x509.ExtKeyUsage, dnsNames []string) Leaf {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(tb),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}
		tmpl.DNSNames = dnsNames
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	l := Leaf{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}
	if l.TLS, err = tls.X509KeyPair(l.CertPEM, l.KeyPEM); err != nil {
		tb.Fatal(err)
	}
	return l
}

// WriteFiles writes the leaf's certificate and key as name.crt and name.key (0600) into
// dir and returns their paths.
func (l Leaf) WriteFiles(tb testing.TB, dir, name string) (certPath, keyPath string) {
	tb.Helper()
	certPath, keyPath = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certPath, l.CertPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyPath, l.KeyPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return certPath, keyPath
}

// WriteCert writes the CA's certificate as name.crt into dir and returns its path.
func (ca *CA) WriteCert(tb testing.TB, dir, name string) string {
	tb.Helper()
	p := filepath.Join(dir, name+".crt")
	if err := os.WriteFile(p, ca.CertPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func serial(tb testing.TB) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}
