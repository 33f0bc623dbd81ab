package evidence

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
)

// A signed receipt is an in-toto Statement v1 whose subject is the head
// commit and whose predicate is the receipt, in a DSSE envelope signed with
// ed25519:
//
//	{"payloadType": "application/vnd.in-toto+json",
//	 "payload": base64({"_type": "https://in-toto.io/Statement/v1",
//	                    "subject": [{"name": "commit", "digest": {"gitCommit": "<head>"}}],
//	                    "predicateType": "https://vouch.dev/receipt/v1",
//	                    "predicate": <receipt>}),
//	 "signatures": [{"keyid": "<sha256 of the public key>", "sig": base64(ed25519)}]}
const (
	// PayloadType is the DSSE payload type of a signed receipt.
	PayloadType = "application/vnd.in-toto+json"
	// PredicateType is the in-toto predicate type of a vouch receipt.
	PredicateType = "https://vouch.dev/receipt/v1"
	// SubjectName names the statement's one subject, the head commit.
	SubjectName = "commit"
)

// ErrInvalidReceipt is wrapped by every error VerifyEnvelope returns for an
// envelope that is not a valid signed receipt (as opposed to one it could
// not read at all).
var ErrInvalidReceipt = errors.New("invalid signed receipt")

// statement is the JSON form of an in-toto Statement v1 with a receipt as
// predicate. The payload is written with encoding/json so that it is
// deterministic and the predicate is exactly Receipt.JSON's (protojson would
// turn every number into a float); the in-toto bindings check it.
type statement struct {
	Type          string          `json:"_type"`
	Subject       []subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

type subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Sign returns rc as a DSSE envelope (JSON) around an in-toto statement about
// rc's head commit, signed with key. rc.Head must be a 40-hex commit SHA
// (in-toto's gitCommit digest): a receipt with no head has nothing to attest.
func Sign(rc Receipt, key ed25519.PrivateKey) ([]byte, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("sign receipt: ed25519 private key has %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	predicate, err := rc.JSON()
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	payload, err := json.Marshal(statement{
		Type:          intoto.StatementTypeUri,
		Subject:       []subject{{Name: SubjectName, Digest: map[string]string{string(intoto.AlgorithmGitCommit): rc.Head}}},
		PredicateType: PredicateType,
		Predicate:     predicate,
	})
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	if _, err := parseStatement(payload); err != nil {
		return nil, fmt.Errorf("sign receipt of head %q: %w", oneLine(rc.Head, 80), err)
	}
	signer, err := dsse.NewEnvelopeSigner(ed25519Signer{key: key})
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	env, err := signer.SignPayload(context.Background(), PayloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	out, err := json.MarshalIndent(env, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("sign receipt: %w", err)
	}
	return append(out, '\n'), nil
}

// VerifyEnvelope checks that envelope is a DSSE envelope of payload type
// PayloadType signed by pub, around an in-toto Statement v1 of predicate
// type PredicateType whose one subject is the commit the receipt names as
// head, and returns the receipt. Every failure wraps ErrInvalidReceipt.
func VerifyEnvelope(envelope []byte, pub ed25519.PublicKey) (Receipt, error) {
	invalid := func(format string, args ...any) (Receipt, error) {
		return Receipt{}, fmt.Errorf("%w: %s", ErrInvalidReceipt, fmt.Sprintf(format, args...))
	}
	if len(pub) != ed25519.PublicKeySize {
		return invalid("ed25519 public key has %d bytes, want %d", len(pub), ed25519.PublicKeySize)
	}
	var env dsse.Envelope
	if err := decodeStrict(envelope, &env); err != nil {
		return invalid("not a DSSE envelope: %v", err)
	}
	if env.PayloadType != PayloadType {
		return invalid("payload type is %q, want %q", oneLine(env.PayloadType, 200), PayloadType)
	}
	verifier, err := dsse.NewEnvelopeVerifier(ed25519Verifier{pub: pub})
	if err != nil {
		return invalid("%v", err)
	}
	_, payload, err := verifier.VerifyAndDecode(context.Background(), &env)
	if err != nil {
		return invalid("signature does not verify with this key: %v", err)
	}
	st, err := parseStatement(payload)
	if err != nil {
		return invalid("%v", err)
	}
	var rc Receipt
	if err := json.Unmarshal(st.Predicate, &rc); err != nil {
		return invalid("predicate is not a receipt: %v", err)
	}
	if got := st.Subject[0].Digest[string(intoto.AlgorithmGitCommit)]; got != rc.Head {
		return invalid("subject is commit %q but the receipt's head is %q", oneLine(got, 80), oneLine(rc.Head, 80))
	}
	return rc, nil
}

// parseStatement checks payload with the in-toto bindings (a valid
// Statement: no unknown or duplicate fields, hex digests of the right
// length) and vouch's shape: type v1, PredicateType, one subject named
// SubjectName with exactly a gitCommit digest.
func parseStatement(payload []byte) (statement, error) {
	var pb intoto.Statement
	if err := protojson.Unmarshal(payload, &pb); err != nil {
		return statement{}, fmt.Errorf("not an in-toto statement: %w", err)
	}
	if err := pb.Validate(); err != nil {
		return statement{}, fmt.Errorf("invalid in-toto statement: %w", err)
	}
	if pb.GetType() != intoto.StatementTypeUri {
		return statement{}, fmt.Errorf("statement type is %q, want %q", oneLine(pb.GetType(), 200), intoto.StatementTypeUri)
	}
	if pb.GetPredicateType() != PredicateType {
		return statement{}, fmt.Errorf("predicate type is %q, want %q", oneLine(pb.GetPredicateType(), 200), PredicateType)
	}
	var st statement
	if err := decodeStrict(payload, &st); err != nil {
		return statement{}, fmt.Errorf("statement: %w", err)
	}
	if len(st.Subject) != 1 || st.Subject[0].Name != SubjectName || len(st.Subject[0].Digest) != 1 || st.Subject[0].Digest[string(intoto.AlgorithmGitCommit)] == "" {
		return statement{}, fmt.Errorf("subject must be one %q with only a %s digest", SubjectName, intoto.AlgorithmGitCommit)
	}
	return st, nil
}

// decodeStrict decodes one JSON value from b into v, refusing unknown
// fields and trailing data.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// ed25519Signer is a dsse.Signer with an ed25519 key.
type ed25519Signer struct{ key ed25519.PrivateKey }

func (s ed25519Signer) Sign(_ context.Context, data []byte) ([]byte, error) {
	return ed25519.Sign(s.key, data), nil
}

func (s ed25519Signer) KeyID() (string, error) {
	return dsse.SHA256KeyID(s.key.Public())
}

// ed25519Verifier is a dsse.Verifier with an ed25519 public key.
type ed25519Verifier struct{ pub ed25519.PublicKey }

func (v ed25519Verifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("ed25519: signature does not verify")
	}
	return nil
}

func (v ed25519Verifier) KeyID() (string, error) { return dsse.SHA256KeyID(v.pub) }

func (v ed25519Verifier) Public() crypto.PublicKey { return v.pub }

var (
	_ dsse.Signer   = ed25519Signer{}
	_ dsse.Verifier = ed25519Verifier{}
)

// LoadOrCreateKey returns the ed25519 signing key in the PEM (PKCS #8) file
// at path, generating and writing it, mode 0600, when the file does not
// exist. It refuses an existing file that its group or others may read or
// write, and a key that is not ed25519.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, error) {
	b, err := readPrivate(path)
	if errors.Is(err, fs.ErrNotExist) {
		return createKey(path)
	}
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("load signing key %s: no PEM \"PRIVATE KEY\" block", path)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("load signing key %s: %w", path, err)
	}
	key, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("load signing key %s: %T is not an ed25519 key", path, k)
	}
	return key, nil
}

// readPrivate reads the file at path after checking that only its owner may
// read or write it.
func readPrivate(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load signing key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("load signing key %s: not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("load signing key %s: mode %04o lets others read or write it; chmod 600 it", path, perm)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("load signing key %s: %w", path, err)
	}
	return b, nil
}

// createKey generates a key and writes it to path, which must not exist.
func createKey(path string) (ed25519.PrivateKey, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	// O_EXCL: two starts racing both generate, one writes, the other fails
	// and must not sign with a key nobody kept.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	if err := pem.Encode(f, &pem.Block{Type: "PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, fmt.Errorf("create signing key %s: %w", path, err)
	}
	return key, nil
}

// PublicKeyPEM returns pub as a PEM "PUBLIC KEY" block (PKIX), the form
// `vouch receipt verify --key` reads and the service serves at /key; nil
// when pub is not an ed25519 public key's length.
func PublicKeyPEM(pub ed25519.PublicKey) []byte {
	if len(pub) != ed25519.PublicKeySize {
		return nil
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParsePublicKeyPEM reads an ed25519 public key written by PublicKeyPEM.
func ParsePublicKeyPEM(b []byte) (ed25519.PublicKey, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PUBLIC KEY" {
		return nil, errors.New("parse public key: no PEM \"PUBLIC KEY\" block")
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("parse public key: %T is not an ed25519 key", k)
	}
	return pub, nil
}
