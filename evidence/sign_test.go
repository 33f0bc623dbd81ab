package evidence

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
)

// testKey is a fixed key, so that signed envelopes are reproducible.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

// mustSign signs rc with key or fails the test.
func mustSign(t testing.TB, rc Receipt, key ed25519.PrivateKey) []byte {
	t.Helper()
	env, err := Sign(rc, key)
	if err != nil {
		t.Fatalf("Sign() error: %v", err)
	}
	return env
}

// decodeEnvelope parses env's JSON or fails the test.
func decodeEnvelope(t testing.TB, env []byte) dsse.Envelope {
	t.Helper()
	var e dsse.Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		t.Fatalf("envelope is not JSON: %v", err)
	}
	return e
}

// encodeEnvelope writes e as JSON or fails the test.
func encodeEnvelope(t testing.TB, e dsse.Envelope) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// signRaw signs any payload as vouch's signer would, to build envelopes
// that Sign refuses to make.
func signRaw(t testing.TB, payloadType string, payload []byte, key ed25519.PrivateKey) []byte {
	t.Helper()
	s, err := dsse.NewEnvelopeSigner(ed25519Signer{key: key})
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.SignPayload(t.Context(), payloadType, payload)
	if err != nil {
		t.Fatal(err)
	}
	return encodeEnvelope(t, *e)
}

// receiptJSON is rc's canonical JSON, for comparisons.
func receiptJSON(t testing.TB, rc Receipt) string {
	t.Helper()
	b, err := rc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSignRoundTrip(t *testing.T) {
	key := testKey(1)
	pub := key.Public().(ed25519.PublicKey)
	for name, rc := range goldenReceipts() {
		t.Run(name, func(t *testing.T) {
			env := mustSign(t, rc, key)
			got, err := VerifyEnvelope(env, pub)
			if err != nil {
				t.Fatalf("VerifyEnvelope(Sign(%s)) error: %v", name, err)
			}
			if diff := cmp.Diff(receiptJSON(t, rc), receiptJSON(t, got)); diff != "" {
				t.Errorf("VerifyEnvelope(Sign(%s)) receipt differs (-want +got):\n%s", name, diff)
			}
		})
	}
	checkGolden(t, "envelope_pass.golden", string(mustSign(t, goldenReceipts()["pass"], key)))
}

func TestSignStatementShape(t *testing.T) {
	env := decodeEnvelope(t, mustSign(t, goldenReceipts()["pass"], testKey(1)))
	if env.PayloadType != "application/vnd.in-toto+json" || len(env.Signatures) != 1 {
		t.Fatalf("envelope = type %q, %d signatures; want application/vnd.in-toto+json, 1", env.PayloadType, len(env.Signatures))
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(payload, &st); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"predicateType": "https://vouch.dev/receipt/v1",
		"subject":       []any{map[string]any{"name": "commit", "digest": map[string]any{"gitCommit": testHead}}},
	}
	pred := st["predicate"].(map[string]any)
	delete(st, "predicate")
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("statement differs (-want +got):\n%s", diff)
	}
	if pred["outcome"] != "PASS" || pred["head"] != testHead {
		t.Errorf("predicate = %v, want the receipt", pred)
	}
}

// TestVerifyEnvelopeTampered flips, one at a time, every byte of a small
// receipt's payload and of its signature, and checks that none verifies.
func TestVerifyEnvelopeTampered(t *testing.T) {
	key := testKey(2)
	pub := key.Public().(ed25519.PublicKey)
	rc := NewError(testBase, testHead, ReasonInternal, "x")
	env := decodeEnvelope(t, mustSign(t, rc, key))
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyEnvelope(encodeEnvelope(t, env), pub); err != nil {
		t.Fatalf("untampered envelope does not verify: %v", err)
	}
	for _, mask := range []byte{0x01, 0x80, 0xff} {
		for i := range payload {
			p := bytes.Clone(payload)
			p[i] ^= mask
			e := env
			e.Payload = base64.StdEncoding.EncodeToString(p)
			if rc, err := VerifyEnvelope(encodeEnvelope(t, e), pub); err == nil || !errors.Is(err, ErrInvalidReceipt) {
				t.Fatalf("payload byte %d ^ %#x: VerifyEnvelope() = %s, %v; want ErrInvalidReceipt", i, mask, rc.Outcome, err)
			}
		}
		for i := range sig {
			s := bytes.Clone(sig)
			s[i] ^= mask
			e := env
			e.Signatures = []dsse.Signature{{KeyID: env.Signatures[0].KeyID, Sig: base64.StdEncoding.EncodeToString(s)}}
			if _, err := VerifyEnvelope(encodeEnvelope(t, e), pub); !errors.Is(err, ErrInvalidReceipt) {
				t.Fatalf("signature byte %d ^ %#x: VerifyEnvelope() error = %v, want ErrInvalidReceipt", i, mask, err)
			}
		}
	}
	t.Logf("checked %d payload and %d signature bytes", len(payload), len(sig))
}

func TestVerifyEnvelopeRefuses(t *testing.T) {
	key := testKey(3)
	pub := key.Public().(ed25519.PublicKey)
	rc := goldenReceipts()["pass"]
	good := mustSign(t, rc, key)
	pred, err := rc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	statementWith := func(typ, predType, name string, digest map[string]string) []byte {
		b, err := json.Marshal(map[string]any{
			"_type": typ, "predicateType": predType, "predicate": json.RawMessage(pred),
			"subject": []any{map[string]any{"name": name, "digest": digest}},
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const other = "ffffffffffffffffffffffffffffffffffffffff"
	withEnv := func(f func(*dsse.Envelope)) []byte {
		e := decodeEnvelope(t, good)
		f(&e)
		return encodeEnvelope(t, e)
	}

	tests := []struct {
		name string
		env  []byte
		pub  ed25519.PublicKey
		want string
	}{
		{"wrong key", good, testKey(4).Public().(ed25519.PublicKey), "signature"},
		{"short key", good, pub[:16], "public key"},
		{"subject is another commit", signRaw(t, PayloadType, statementWith("https://in-toto.io/Statement/v1", PredicateType, "commit", map[string]string{"gitCommit": other}), key), pub, "subject"},
		{"two digests", signRaw(t, PayloadType, statementWith("https://in-toto.io/Statement/v1", PredicateType, "commit", map[string]string{"gitCommit": testHead, "sha1": other}), key), pub, "subject"},
		{"subject named otherwise", signRaw(t, PayloadType, statementWith("https://in-toto.io/Statement/v1", PredicateType, "pkg:x", map[string]string{"gitCommit": testHead}), key), pub, "subject"},
		{"other predicate type", signRaw(t, PayloadType, statementWith("https://in-toto.io/Statement/v1", "https://slsa.dev/provenance/v1", "commit", map[string]string{"gitCommit": testHead}), key), pub, "predicate type"},
		{"legacy statement type", signRaw(t, PayloadType, statementWith("https://in-toto.io/Statement/v0.1", PredicateType, "commit", map[string]string{"gitCommit": testHead}), key), pub, "statement type"},
		{"other statement type", signRaw(t, PayloadType, statementWith("https://example.com/Statement/v1", PredicateType, "commit", map[string]string{"gitCommit": testHead}), key), pub, "statement"},
		{"other payload type", signRaw(t, "application/json", statementWith("https://in-toto.io/Statement/v1", PredicateType, "commit", map[string]string{"gitCommit": testHead}), key), pub, "payload type"},
		{"payload not JSON", signRaw(t, PayloadType, []byte("not json"), key), pub, "statement"},
		{"unknown statement field", signRaw(t, PayloadType, []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"commit","digest":{"gitCommit":"`+testHead+`"}}],"predicateType":"`+PredicateType+`","predicate":{"head":"`+testHead+`"},"extra":1}`), key), pub, "statement"},
		{"duplicate predicate", signRaw(t, PayloadType, []byte(`{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"commit","digest":{"gitCommit":"`+testHead+`"}}],"predicateType":"`+PredicateType+`","predicate":{"head":"`+testHead+`"},"predicate":{"head":"`+other+`"}}`), key), pub, "statement"},
		{"no signatures", withEnv(func(e *dsse.Envelope) { e.Signatures = nil }), pub, "signature"},
		{"unknown envelope field", append(bytes.TrimSuffix(bytes.TrimSpace(bytes.Clone(good)), []byte("}")), []byte(`,"x":1}`)...), pub, "DSSE"},
		{"trailing data", append(bytes.Clone(good), []byte("{}")...), pub, "DSSE"},
		{"not JSON", []byte("garbage"), pub, "DSSE"},
		{"empty", nil, pub, "DSSE"},
		{"bad base64 payload", withEnv(func(e *dsse.Envelope) { e.Payload = "!!!" }), pub, "signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := VerifyEnvelope(tt.env, tt.pub)
			if !errors.Is(err, ErrInvalidReceipt) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("VerifyEnvelope(%s) = %s, %v; want ErrInvalidReceipt mentioning %q", tt.name, got.Outcome, err, tt.want)
			}
		})
	}
}

func TestSignRefusesNoHead(t *testing.T) {
	for _, head := range []string{"", "abc", "zz" + testHead[2:], testHead + "00"} {
		rc := NewError(testBase, head, ReasonInternal, "x")
		if _, err := Sign(rc, testKey(1)); err == nil {
			t.Errorf("Sign(head %q) succeeded, want an error: the subject must be a commit", head)
		}
	}
	if _, err := Sign(goldenReceipts()["pass"], ed25519.PrivateKey{1, 2}); err == nil {
		t.Error("Sign(short key) succeeded, want an error")
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys", "vouch.key")
	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey(new) error: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("created key mode = %04o, want 0600", perm)
	}
	pemBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pemBytes, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Errorf("key file = %q, want PEM PRIVATE KEY", pemBytes)
	}
	again, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey(existing) error: %v", err)
	}
	if !key.Equal(again) {
		t.Error("LoadOrCreateKey(existing) returned another key")
	}

	for _, mode := range []os.FileMode{0o640, 0o604, 0o660, 0o602, 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("LoadOrCreateKey(mode %04o) error = %v, want a refusal", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateKey(path); err != nil {
		t.Errorf("LoadOrCreateKey(mode 0400) error: %v", err)
	}

	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]string{
		"garbage":     write("garbage", []byte("not a key")),
		"ecdsa":       write("ecdsa", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})),
		"public key":  write("pub", PublicKeyPEM(key.Public().(ed25519.PublicKey))),
		"bad der":     write("der", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})),
		"a directory": dir,
	} {
		if _, err := LoadOrCreateKey(p); err == nil {
			t.Errorf("LoadOrCreateKey(%s) succeeded, want an error", name)
		}
	}
}

func TestPublicKeyPEM(t *testing.T) {
	pub := testKey(5).Public().(ed25519.PublicKey)
	b := PublicKeyPEM(pub)
	if !bytes.HasPrefix(b, []byte("-----BEGIN PUBLIC KEY-----\n")) {
		t.Fatalf("PublicKeyPEM() = %q, want a PEM PUBLIC KEY", b)
	}
	got, err := ParsePublicKeyPEM(b)
	if err != nil || !got.Equal(pub) {
		t.Errorf("ParsePublicKeyPEM(PublicKeyPEM(pub)) = %x, %v; want %x", got, err, pub)
	}
	if PublicKeyPEM(pub[:10]) != nil {
		t.Error("PublicKeyPEM(short key) is not nil")
	}
	for _, bad := range [][]byte{nil, []byte("x"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}})} {
		if _, err := ParsePublicKeyPEM(bad); err == nil {
			t.Errorf("ParsePublicKeyPEM(%q) succeeded, want an error", bad)
		}
	}
}
