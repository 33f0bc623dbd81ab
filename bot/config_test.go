package bot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// minimalConfig is the smallest valid configuration.
const minimalConfig = `
forges:
  gitea:
    base_url: http://127.0.0.1:3000
    token: t0ken
    webhook_secret: s3cret
repositories:
  - {forge: gitea, owner: alice, name: demo}
`

func parseString(t *testing.T, s string) (Config, error) {
	t.Helper()
	return Parse(strings.NewReader(s))
}

func TestParseFull(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tokenFile := write("gitea-token", "file-token\n")
	keyFile := write("app.pem", "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----\n")
	t.Setenv("VOUCH_TEST_GH_SECRET", "gh-secret")
	t.Setenv("VOUCH_TEST_DIR", dir)
	t.Setenv("VOUCH_TEST_PGPASS", "pw")

	cfg, err := parseString(t, `
listen: 0.0.0.0:9000
public_url: https://vouch.example.org/
forges:
  gitea:
    base_url: https://git.example.org
    token_file: ${VOUCH_TEST_DIR}/gitea-token
    webhook_secret: literal-secret
    bot_login: vouch-bot
  github:
    api_url: https://ghe.example.org/api/v3/
    app_id: 12
    installation_id: 34
    private_key_file: `+keyFile+`
    webhook_secret: ${VOUCH_TEST_GH_SECRET}
    bot_login: vouch[bot]
repositories:
  - {forge: gitea, owner: alice, name: demo}
  - {forge: github, owner: acme, name: widget}
trust:
  min_permission: maintain
  allow: [Release-Bot]
protected: ["Makefile", "scripts/**"]
toolchains:
  go:
    paths: [/usr/local/go]
    env: {GOTOOLCHAIN: local}
limits: {memory: 2GiB, pids: 512, tmp: 512MiB, output: 4MiB}
workers: 4
store: {driver: postgres, dsn: "postgres://vouch:${VOUCH_TEST_PGPASS}@127.0.0.1/vouch"}
signing_key: /etc/vouch/signing.key
work_root: /var/lib/vouch/work
sandbox: {mode: isolated, bwrap: /usr/local/bin/bwrap}
`)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	_ = tokenFile
	want := Config{
		Listen:    "0.0.0.0:9000",
		PublicURL: "https://vouch.example.org/",
		Forges: Forges{
			Gitea: &GiteaConfig{BaseURL: "https://git.example.org", Token: "file-token",
				TokenFile: dir + "/gitea-token", WebhookSecret: "literal-secret", BotLogin: "vouch-bot"},
			GitHub: &GitHubConfig{APIURL: "https://ghe.example.org/api/v3/", AppID: 12, InstallationID: 34,
				PrivateKeyFile: keyFile, PrivateKey: "-----BEGIN RSA PRIVATE KEY-----\nx\n-----END RSA PRIVATE KEY-----",
				WebhookSecret: "gh-secret", BotLogin: "vouch[bot]"},
		},
		Repositories:         []RepoRef{{Forge: forge.Gitea, Owner: "alice", Name: "demo"}, {Forge: forge.GitHub, Owner: "acme", Name: "widget"}},
		Trust:                TrustConfig{MinPermission: "maintain", Allow: []string{"Release-Bot"}},
		Protected:            []string{"Makefile", "scripts/**"},
		Toolchains:           map[string]ToolchainConfig{"go": {Paths: []string{"/usr/local/go"}, Env: map[string]string{"GOTOOLCHAIN": "local"}}},
		Limits:               LimitsConfig{Memory: 2 << 30, Pids: 512, Tmp: 512 << 20, Output: 4 << 20},
		Workers:              4,
		JobTimeout:           Duration(DefaultJobTimeout),
		FetchCache:           DefaultFetchCache,
		MaxDeliveriesPerPeer: 16,
		Store:                StoreConfig{Driver: "postgres", Path: DefaultStorePath, DSN: "postgres://vouch:pw@127.0.0.1/vouch"},
		SigningKey:           "/etc/vouch/signing.key",
		WorkRoot:             "/var/lib/vouch/work",
		Sandbox:              SandboxConfig{Mode: "isolated", Bwrap: "/usr/local/bin/bwrap"},
	}
	if diff := cmp.Diff(want, cfg); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}

	sc := cfg.SandboxConfig()
	if sc.Mode != sandbox.ModeIsolated || sc.Bwrap != "/usr/local/bin/bwrap" || sc.WorkRoot != "/var/lib/vouch/work" {
		t.Errorf("SandboxConfig() = mode %q bwrap %q work %q", sc.Mode, sc.Bwrap, sc.WorkRoot)
	}
	if diff := cmp.Diff(gate.Limits{Memory: 2 << 30, Pids: 512, Tmp: 512 << 20, Output: 4 << 20}, sc.Max); diff != "" {
		t.Errorf("SandboxConfig().Max (-want +got):\n%s", diff)
	}
	if got := sc.Toolchains["go"].Env["GOTOOLCHAIN"]; got != "local" {
		t.Errorf("SandboxConfig().Toolchains[go].Env = %q", got)
	}
	if tp := cfg.TrustPolicy(); tp.MinPermission != forge.PermMaintain || len(tp.Allow) != 1 {
		t.Errorf("TrustPolicy() = %+v", tp)
	}
	if got := cfg.Policy().Protected; len(got) != 2 {
		t.Errorf("Policy().Protected = %q", got)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := parseString(t, minimalConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate(minimal) = %v", err)
	}
	if cfg.Workers != 2 || cfg.Store.Driver != "sqlite" || cfg.Store.Path != "./vouch-data/vouch.db" ||
		cfg.SigningKey != "./vouch-data/signing.key" || cfg.Trust.MinPermission != "write" || cfg.Listen != DefaultListen {
		t.Errorf("defaults = %+v", cfg)
	}
	if cfg.TrustPolicy().MinPermission != forge.PermWrite {
		t.Errorf("TrustPolicy().MinPermission = %v, want write", cfg.TrustPolicy().MinPermission)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	cfg, err := parseString(t, minimalConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(format, cfg.Forges.Gitea); strings.Contains(out, "s3cret") || strings.Contains(out, "t0ken") {
			t.Errorf("Sprintf(%q) leaks a secret: %s", format, out)
		}
	}
}

// TestConfigErrors checks that each mistake is refused and named.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "empty")
	if err := os.WriteFile(emptyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Unsetenv("VOUCH_TEST_UNSET")
	gitea := func(extra string) string {
		return "forges:\n  gitea:\n    base_url: http://127.0.0.1:3000\n    token: t\n" + extra +
			"repositories:\n  - {forge: gitea, owner: alice, name: demo}\n"
	}
	tests := []struct {
		name string
		yaml string
		// parseErr or validErr must appear in the error text.
		parseErr, validErr string
	}{
		{name: "unknown top-level key", yaml: minimalConfig + "listne: :80\n", parseErr: "line 9: field listne not found"},
		{name: "unknown nested key", yaml: "forges:\n  gitea:\n    base_url: x\n    secret: y\n", parseErr: "line 4: field secret not found"},
		{name: "wrong type", yaml: minimalConfig + "workers: many\n", parseErr: "line 9"},
		{name: "bad size", yaml: minimalConfig + "limits: {memory: lots}\n", parseErr: "line 9: \"lots\" is not a positive size"},
		{name: "two documents", yaml: minimalConfig + "---\nlisten: :1\n", parseErr: "more than one YAML document"},
		{name: "unset env", yaml: gitea("    webhook_secret: ${VOUCH_TEST_UNSET}\n"), parseErr: "forges.gitea.webhook_secret: environment variable VOUCH_TEST_UNSET is not set"},
		{name: "missing secret file", yaml: gitea("    webhook_secret_file: " + filepath.Join(dir, "nope") + "\n"), parseErr: "forges.gitea.webhook_secret_file"},
		{name: "secret and file", yaml: gitea("    webhook_secret: a\n    webhook_secret_file: " + secretFile + "\n"), parseErr: "webhook_secret and forges.gitea.webhook_secret_file are both set"},
		{name: "empty webhook secret", yaml: gitea(""), validErr: "forges.gitea.webhook_secret: empty: refusing"},
		{name: "empty webhook secret literal", yaml: gitea("    webhook_secret: \"\"\n"), validErr: "forges.gitea.webhook_secret: empty"},
		{name: "empty webhook secret file", yaml: gitea("    webhook_secret_file: " + emptyFile + "\n"), validErr: "forges.gitea.webhook_secret: empty"},
		{name: "no forge", yaml: "repositories: []\n", validErr: "forges: configure at least one"},
		{name: "no repositories", yaml: strings.Split(minimalConfig, "repositories:")[0], validErr: "repositories: list at least one"},
		{name: "bad base url", yaml: strings.Replace(minimalConfig, "http://127.0.0.1:3000", "127.0.0.1:3000", 1), validErr: "forges.gitea.base_url"},
		{name: "no token", yaml: strings.Replace(minimalConfig, "token: t0ken", "bot_login: b", 1), validErr: "forges.gitea.token: empty"},
		{name: "repo on unconfigured forge", yaml: minimalConfig + "  - {forge: github, owner: a, name: b}\n", validErr: "repositories[1].forge: github is not configured"},
		{name: "repo unknown forge", yaml: minimalConfig + "  - {forge: gitlab, owner: a, name: b}\n", validErr: "repositories[1].forge: \"gitlab\""},
		{name: "repo bad owner", yaml: minimalConfig + "  - {forge: gitea, owner: \"a/b\", name: b}\n", validErr: "repositories[1].owner"},
		{name: "repo missing name", yaml: minimalConfig + "  - {forge: gitea, owner: a}\n", validErr: "repositories[1].name"},
		{name: "repo duplicate", yaml: minimalConfig + "  - {forge: gitea, owner: Alice, name: demo}\n", validErr: "repositories[1]: duplicates repositories[0]"},
		{name: "permission unknown", yaml: minimalConfig + "trust: {min_permission: god}\n", validErr: "trust.min_permission: \"god\""},
		{name: "permission read", yaml: minimalConfig + "trust: {min_permission: read}\n", validErr: "would trust every reader"},
		{name: "permission none", yaml: minimalConfig + "trust: {min_permission: none}\n", validErr: "would trust every reader"},
		{name: "allow empty login", yaml: minimalConfig + "trust: {allow: [\"\"]}\n", validErr: "trust.allow[0]"},
		{name: "bad glob", yaml: minimalConfig + "protected: [\"a[\"]\n", validErr: "protected[0]"},
		{name: "toolchain without paths", yaml: minimalConfig + "toolchains: {go: {env: {A: b}}}\n", validErr: "toolchains.go.paths: list at least one"},
		{name: "toolchain relative path", yaml: minimalConfig + "toolchains: {go: {paths: [go]}}\n", validErr: "toolchains.go.paths[0]"},
		{name: "toolchain root", yaml: minimalConfig + "toolchains: {go: {paths: [/]}}\n", validErr: "toolchains.go.paths[0]"},
		{name: "negative pids", yaml: minimalConfig + "limits: {pids: -1}\n", validErr: "limits.pids"},
		{name: "zero workers", yaml: minimalConfig + "workers: 0\n", validErr: "workers: 0"},
		{name: "bad listen", yaml: minimalConfig + "listen: nowhere\n", validErr: "listen: \"nowhere\""},
		{name: "bad public url", yaml: minimalConfig + "public_url: vouch.example.org\n", validErr: "public_url"},
		{name: "store driver", yaml: minimalConfig + "store: {driver: mysql}\n", validErr: "store.driver: \"mysql\""},
		{name: "sqlite without path", yaml: minimalConfig + "store: {path: \"\"}\n", validErr: "store.path"},
		{name: "postgres without dsn", yaml: minimalConfig + "store: {driver: postgres}\n", validErr: "store.dsn"},
		{name: "no signing key", yaml: minimalConfig + "signing_key: \"\"\n", validErr: "signing_key"},
		{name: "relative work root", yaml: minimalConfig + "work_root: work\n", validErr: "work_root"},
		{name: "sandbox mode typo", yaml: minimalConfig + "sandbox: {mode: trusted}\n", validErr: "sandbox.mode: \"trusted\""},
		{name: "sandbox mode not expanded", yaml: minimalConfig + "sandbox: {mode: \"${VOUCH_TEST_UNSET}\"}\n", validErr: "sandbox.mode"},
		{name: "github app and token", yaml: "forges:\n  github: {app_id: 1, installation_id: 2, token: x, webhook_secret: s}\nrepositories: [{forge: github, owner: a, name: b}]\n", validErr: "forges.github: set either"},
		{name: "github nothing", yaml: "forges:\n  github: {webhook_secret: s}\nrepositories: [{forge: github, owner: a, name: b}]\n", validErr: "forges.github: set app_id"},
		{name: "github app incomplete", yaml: "forges:\n  github: {app_id: 1, webhook_secret: s}\nrepositories: [{forge: github, owner: a, name: b}]\n", validErr: "forges.github.installation_id"},
		{name: "github no secret", yaml: "forges:\n  github: {token: x}\nrepositories: [{forge: github, owner: a, name: b}]\n", validErr: "forges.github.webhook_secret: empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseString(t, tt.yaml)
			if tt.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.parseErr) {
					t.Fatalf("Parse() error = %v, want one containing %q", err, tt.parseErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse() = %v", err)
			}
			err = cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.validErr) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tt.validErr)
			}
		})
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	cfg, err := parseString(t, "workers: -1\nstore: {driver: x}\nsandbox: {mode: off}\n")
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	for _, field := range []string{"forges:", "repositories:", "workers:", "store.driver:", "sandbox.mode:"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate() = %v, want it to name %s", err, field)
		}
	}
}

func TestSecretFileTrimmed(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte("  spaced secret \r\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseString(t, strings.Replace(minimalConfig, "webhook_secret: s3cret", "webhook_secret_file: "+p, 1))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(cfg.Forges.Gitea.WebhookSecret); got != "  spaced secret " {
		t.Errorf("webhook secret from file = %q, want %q", got, "  spaced secret ")
	}
}

// TestTrustedDevelopmentOnlyWhenWritten: no configuration, old, empty or
// partial, turns off isolation unless `sandbox.mode: trusted-development`
// is written in it.
func TestTrustedDevelopmentOnlyWhenWritten(t *testing.T) {
	t.Setenv("VOUCH_SANDBOX_MODE", "trusted-development")
	t.Setenv("MODE", "trusted-development")
	isolated := []struct{ name, yaml string }{
		{"empty", ""},
		{"comment only", "# vouch\n"},
		{"null document", "~\n"},
		{"minimal (an old config without sandbox)", minimalConfig},
		{"sandbox null", minimalConfig + "sandbox:\n"},
		{"sandbox empty", minimalConfig + "sandbox: {}\n"},
		{"mode null", minimalConfig + "sandbox: {mode: }\n"},
		{"mode isolated", minimalConfig + "sandbox: {mode: isolated}\n"},
		{"bwrap only", minimalConfig + "sandbox: {bwrap: /bin/bwrap}\n"},
		{"env reference is not expanded", minimalConfig + "sandbox: {mode: \"${MODE}\"}\n"},
		{"trust everything else", minimalConfig + "trust: {min_permission: admin, allow: [a]}\nworkers: 64\n"},
	}
	if got := DefaultConfig().SandboxMode(); got != sandbox.ModeIsolated {
		t.Errorf("DefaultConfig().SandboxMode() = %q, want isolated", got)
	}
	if got := (Config{}).SandboxMode(); got != sandbox.ModeIsolated {
		t.Errorf("Config{}.SandboxMode() = %q, want isolated", got)
	}
	for _, tt := range isolated {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseString(t, tt.yaml)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := cfg.SandboxMode(); got != sandbox.ModeIsolated {
				t.Errorf("SandboxMode() = %q, want isolated", got)
			}
			if got := cfg.SandboxConfig().Mode; got != sandbox.ModeIsolated {
				t.Errorf("SandboxConfig().Mode = %q, want isolated", got)
			}
		})
	}
	cfg, err := parseString(t, minimalConfig+"sandbox: {mode: trusted-development}\n")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.SandboxConfig().Mode; got != sandbox.ModeTrustedDevelopment {
		t.Errorf("written trusted-development: SandboxConfig().Mode = %q", got)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vouch.yaml")
	if err := os.WriteFile(p, []byte(minimalConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Errorf("Load(valid) = %v", err)
	}
	if err := os.WriteFile(p, []byte("forges: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("Load(invalid) = %v, want an error naming the file", err)
	}
}
