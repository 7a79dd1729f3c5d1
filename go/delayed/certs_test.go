package delayed

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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

// testCertificates are a throwaway CA and the certificates it signed, as PEM files in a directory: a
// server's for 127.0.0.1 and a client's.
type testCertificates struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func makeCertificates(t testing.TB) *testCertificates {
	t.Helper()
	dir := t.TempDir()
	write := func(name, kind string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return key
	}
	template := func(serial int64, name string) *x509.Certificate {
		return &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		}
	}
	caKey := newKey()
	ca := template(1, "delayed test CA")
	ca.IsCA, ca.BasicConstraintsValid, ca.KeyUsage = true, true, x509.KeyUsageCertSign
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certs := &testCertificates{CA: write("ca.crt", "CERTIFICATE", caDER)}
	signed := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		key := newKey()
		cert := template(serial, name)
		cert.ExtKeyUsage = []x509.ExtKeyUsage{usage}
		cert.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		der, err := x509.CreateCertificate(rand.Reader, cert, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return write(name+".crt", "CERTIFICATE", der), write(name+".key", "EC PRIVATE KEY", keyDER)
	}
	certs.ServerCert, certs.ServerKey = signed(2, "server", x509.ExtKeyUsageServerAuth)
	certs.ClientCert, certs.ClientKey = signed(3, "client", x509.ExtKeyUsageClientAuth)
	return certs
}
