package main

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vouch.dev/vouch/evidence"
)

const receiptHead = "abc1234def5678901234567890abcdef12345678"

// signedReceipt writes a receipt signed with a fixed key, its public key and
// another key's public key to a temp dir and returns their paths.
func signedReceipt(t *testing.T) (receipt, pub, otherPub string) {
	t.Helper()
	dir := t.TempDir()
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize))
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{8}, ed25519.SeedSize))
	rc := evidence.Receipt{
		Outcome: evidence.Pass, Reason: evidence.ReasonAllStepsPassed,
		Base: strings.Repeat("1", 40), Head: receiptHead, MergeBase: strings.Repeat("2", 40),
		Recipe: evidence.RecipeRef{Path: ".vouch.yml", SHA256: strings.Repeat("9", 64)}, Executed: true,
		Steps: []evidence.StepRecord{{Name: "unit", OutputTail: "ok\n"}},
	}
	env, err := evidence.Sign(rc, key)
	if err != nil {
		t.Fatal(err)
	}
	receipt, pub, otherPub = filepath.Join(dir, "receipt.json"), filepath.Join(dir, "vouch.pub"), filepath.Join(dir, "other.pub")
	for p, b := range map[string][]byte{
		receipt:  env,
		pub:      evidence.PublicKeyPEM(key.Public().(ed25519.PublicKey)),
		otherPub: evidence.PublicKeyPEM(other.Public().(ed25519.PublicKey)),
	} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return receipt, pub, otherPub
}

// tamper writes a copy of the envelope at path with one payload byte
// flipped and returns its path.
func tamper(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]any
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env["payload"].(string))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(payload, []byte(`"PASS"`))
	payload[i+1] = 'F' // "FASS"
	env["payload"] = base64.StdEncoding.EncodeToString(payload)
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tampered.json")
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReceiptVerify(t *testing.T) {
	receipt, pub, otherPub := signedReceipt(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	if err := os.WriteFile(garbage, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{"valid", []string{"receipt", "verify", receipt, "--key", pub}, 0, []string{"VALID", "head:      " + receiptHead, "OUTCOME=PASS\n", "REASON=ALL_STEPS_PASSED\n"}, ""},
		{"valid, flags first", []string{"receipt", "verify", "--key=" + pub, receipt}, 0, []string{"OUTCOME=PASS\n"}, ""},
		{"tampered", []string{"receipt", "verify", tamper(t, receipt), "--key", pub}, 1, []string{"INVALID", "signature"}, ""},
		{"wrong key", []string{"receipt", "verify", receipt, "--key", otherPub}, 1, []string{"INVALID", "signature"}, ""},
		{"not an envelope", []string{"receipt", "verify", garbage, "--key", pub}, 1, []string{"INVALID"}, ""},
		{"missing file", []string{"receipt", "verify", filepath.Join(dir, "nope.json"), "--key", pub}, 2, nil, "no such file"},
		{"missing key file", []string{"receipt", "verify", receipt, "--key", filepath.Join(dir, "nope.pub")}, 2, nil, "no such file"},
		{"key is not a public key", []string{"receipt", "verify", receipt, "--key", garbage}, 2, nil, "PUBLIC KEY"},
		{"no --key", []string{"receipt", "verify", receipt}, 2, nil, "usage"},
		{"no file", []string{"receipt", "verify", "--key", pub}, 2, nil, "usage"},
		{"two files", []string{"receipt", "verify", receipt, receipt, "--key", pub}, 2, nil, "usage"},
		{"unknown flag", []string{"receipt", "verify", receipt, "--key", pub, "--nope"}, 2, nil, "nope"},
		{"no subcommand", []string{"receipt"}, 2, nil, "usage"},
		{"unknown subcommand", []string{"receipt", "sign"}, 2, nil, "usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := vouch(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("vouch %q = exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.wantCode, stdout, stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("vouch %q stdout lacks %q:\n%s", tt.args, want, stdout)
				}
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("vouch %q stderr lacks %q:\n%s", tt.args, tt.wantStderr, stderr)
			}
		})
	}
}

func TestReceiptVerifyUsageListed(t *testing.T) {
	if _, stdout, _ := vouch(t, "help"); !strings.Contains(stdout, "receipt  verify FILE --key PUBKEY") {
		t.Errorf("vouch help does not list the receipt command:\n%s", stdout)
	}
}
