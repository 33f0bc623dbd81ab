package bot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// Config is the operator's configuration of `vouch serve`, read from YAML
// with Parse and checked with Validate before anything starts.
type Config struct {
	// Listen is the HTTP listen address, host:port.
	Listen string `yaml:"listen"`
	// PublicURL is where the service is reachable from the forges and from
	// people (evidence pages link under it); empty means no links.
	PublicURL string `yaml:"public_url"`
	// Forges are the forges served; at least one must be configured.
	Forges Forges `yaml:"forges"`
	// Repositories are the repositories served; deliveries for any other
	// repository are ignored.
	Repositories []RepoRef `yaml:"repositories"`
	// Trust decides whose pull requests and commands run without approval.
	Trust TrustConfig `yaml:"trust"`
	// Protected are doublestar globs protected in every repository.
	Protected []string `yaml:"protected"`
	// Toolchains are the named read-only host path sets a recipe may select.
	Toolchains map[string]ToolchainConfig `yaml:"toolchains"`
	// Limits caps what a recipe may ask for; an unset field means no cap.
	Limits LimitsConfig `yaml:"limits"`
	// Workers is how many verifications run at once.
	Workers int `yaml:"workers"`
	// JobTimeout bounds one verification attempt, fetch and all steps
	// included (default 2h). A job running longer on a replica that died is
	// taken over by another after this plus a margin.
	JobTimeout Duration `yaml:"job_timeout"`
	// MaxDeliveriesPerPeer bounds the webhook bodies one address (an IPv6
	// /64) may send at once (default 16); 0 means no bound, for a service
	// behind a proxy, where every delivery comes from the proxy.
	MaxDeliveriesPerPeer int `yaml:"max_deliveries_per_peer"`
	// FetchCache is the directory of the bare repositories commits are
	// fetched into (default ./vouch-data/git).
	FetchCache string `yaml:"fetch_cache"`
	// Store is where deliveries, jobs and receipts are kept.
	Store StoreConfig `yaml:"store"`
	// SigningKey is the path of the receipt signing key.
	SigningKey string `yaml:"signing_key"`
	// WorkRoot is the parent of the per-run sandbox workspaces; empty means
	// the sandbox's default.
	WorkRoot string `yaml:"work_root"`
	// Sandbox chooses how steps run.
	Sandbox SandboxConfig `yaml:"sandbox"`
}

// Forges holds one optional block per supported forge; nil is "not served".
type Forges struct {
	Gitea  *GiteaConfig  `yaml:"gitea"`
	GitHub *GitHubConfig `yaml:"github"`
}

// GiteaConfig configures a Gitea or Forgejo server.
type GiteaConfig struct {
	BaseURL           string `yaml:"base_url"`
	Token             Secret `yaml:"token"`
	TokenFile         string `yaml:"token_file"`
	WebhookSecret     Secret `yaml:"webhook_secret"`
	WebhookSecretFile string `yaml:"webhook_secret_file"`
	// BotLogin is the bot's own login; its comments are never commands.
	BotLogin string `yaml:"bot_login"`
}

// GitHubConfig configures GitHub (or GitHub Enterprise Server), either as a
// GitHub App (app_id, installation_id, private_key_file) or with a token.
type GitHubConfig struct {
	APIURL            string `yaml:"api_url"`
	AppID             int64  `yaml:"app_id"`
	InstallationID    int64  `yaml:"installation_id"`
	PrivateKeyFile    string `yaml:"private_key_file"`
	Token             Secret `yaml:"token"`
	TokenFile         string `yaml:"token_file"`
	WebhookSecret     Secret `yaml:"webhook_secret"`
	WebhookSecretFile string `yaml:"webhook_secret_file"`
	BotLogin          string `yaml:"bot_login"`
	// PrivateKey is the PEM read from PrivateKeyFile by Parse.
	PrivateKey Secret `yaml:"-"`
}

// RepoRef names one served repository.
type RepoRef struct {
	Forge forge.Kind `yaml:"forge"`
	Owner string     `yaml:"owner"`
	Name  string     `yaml:"name"`
}

// Repo is the forge-neutral repository it names.
func (r RepoRef) Repo() forge.Repo { return forge.Repo{Owner: r.Owner, Name: r.Name} }

// TrustConfig is the trust section: a minimum permission and an allowlist.
type TrustConfig struct {
	// MinPermission is the least repository permission that makes a user
	// trusted ("triage", "write", "maintain" or "admin"; default "write").
	MinPermission string `yaml:"min_permission"`
	// Allow are logins trusted whatever their permission.
	Allow []string `yaml:"allow"`
	// Notify is mentioned in STOP_AND_ASK comments so someone who can decide
	// hears of it (e.g. "@org/maintainers"); empty mentions no one.
	Notify string `yaml:"notify"`
}

// ToolchainConfig is one operator toolchain (see sandbox.Toolchain).
type ToolchainConfig struct {
	Paths []string          `yaml:"paths"`
	Env   map[string]string `yaml:"env"`
	Bin   []string          `yaml:"bin"`
}

// LimitsConfig caps a recipe's limits. Sizes are written like 1GiB, 256MiB.
type LimitsConfig struct {
	Memory Size `yaml:"memory"`
	Pids   int  `yaml:"pids"`
	Tmp    Size `yaml:"tmp"`
	Output Size `yaml:"output"`
}

// StoreConfig says where the durable state lives.
type StoreConfig struct {
	// Driver is "sqlite" (embedded, the default) or "postgres".
	Driver string `yaml:"driver"`
	// Path is the SQLite database file.
	Path string `yaml:"path"`
	// DSN is the PostgreSQL connection string; ${ENV} is expanded in it.
	DSN Secret `yaml:"dsn"`
}

// SandboxConfig chooses the sandbox. Mode is "isolated" unless the operator
// writes `mode: trusted-development` in the file: no default, fallback or
// environment variable ever selects it.
type SandboxConfig struct {
	Mode  string `yaml:"mode"`
	Bwrap string `yaml:"bwrap"`
}

// Sandbox modes as the configuration spells them.
const (
	ModeIsolated           = "isolated"
	ModeTrustedDevelopment = string(sandbox.ModeTrustedDevelopment)
)

// Store drivers.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Secret is a configuration value that must not reach logs or error text.
type Secret string

// String redacts the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString redacts the value from %#v.
func (s Secret) GoString() string { return strconv.Quote(s.String()) }

// MarshalJSON, MarshalText and LogValue keep a secret out of JSON, YAML and
// slog output as well as fmt's.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.String())), nil }

// MarshalText is the redacted form, for encoders that use it.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue is the redacted form, for log/slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Duration is a time.Duration written like 90s, 10m or 2h.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// Size is a byte count written as 1GiB, 256MiB, 512KiB, 100B or 4096.
type Size int64

// UnmarshalYAML reads a size, reporting the line of a bad one.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a size must be a single value", n.Line)
	}
	v, err := gate.ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %v", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// Defaults of DefaultConfig.
const (
	DefaultListen        = "127.0.0.1:8080"
	DefaultWorkers       = 2
	DefaultJobTimeout    = 2 * time.Hour
	DefaultFetchCache    = "./vouch-data/git"
	DefaultStorePath     = "./vouch-data/vouch.db"
	DefaultSigningKey    = "./vouch-data/signing.key"
	DefaultMinPermission = "write"
	DefaultGitHubAPI     = "https://api.github.com/"
	maxWorkers           = 256
)

// DefaultConfig is the configuration an empty file yields: isolated sandbox,
// trust from write permission, two workers, SQLite under ./vouch-data.
func DefaultConfig() Config {
	return Config{
		Listen:               DefaultListen,
		Trust:                TrustConfig{MinPermission: DefaultMinPermission},
		Workers:              DefaultWorkers,
		JobTimeout:           Duration(DefaultJobTimeout),
		FetchCache:           DefaultFetchCache,
		MaxDeliveriesPerPeer: 16,
		Store:                StoreConfig{Driver: StoreSQLite, Path: DefaultStorePath},
		SigningKey:           DefaultSigningKey,
		Sandbox:              SandboxConfig{Mode: ModeIsolated},
	}
}

// Parse reads a YAML configuration over DefaultConfig. Unknown keys are
// errors (with their line). ${ENV} references in secret values, the DSN
// and *_file paths are expanded, and *_file contents are read (a trailing
// newline trimmed). Relative paths are relative to the working directory.
// Parse does not Validate.
func Parse(r io.Reader) (Config, error) {
	cfg := DefaultConfig()
	data, err := io.ReadAll(io.LimitReader(r, 1<<20+1))
	if err != nil {
		return Config{}, fmt.Errorf("read config: %w", err)
	}
	if len(data) > 1<<20 {
		return Config{}, errors.New("config: larger than 1 MiB")
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Config{}, errors.New("config: more than one YAML document")
	}
	if err := cfg.resolveSecrets(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Load opens, parses and validates the configuration file at path.
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	cfg, err := Parse(f)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// expandEnv replaces each ${NAME} with the environment's value; an unset
// variable is an error (never silently empty).
func expandEnv(field, s string) (string, error) {
	var missing []string
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := envRef.FindStringSubmatch(ref)[1]
		v, ok := os.LookupEnv(name)
		if !ok {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("%s: environment variable %s is not set", field, strings.Join(missing, ", "))
	}
	return out, nil
}

// secretField resolves one value/value_file pair into value.
func secretField(field string, value *Secret, file *string) error {
	v, err := expandEnv(field, string(*value))
	if err != nil {
		return err
	}
	*value = Secret(v)
	if *file == "" {
		return nil
	}
	path, err := expandEnv(field+"_file", *file)
	if err != nil {
		return err
	}
	*file = path
	if *value != "" {
		return fmt.Errorf("%s and %s_file are both set; choose one", field, field)
	}
	data, err := readSecretFile(field+"_file", path)
	if err != nil {
		return err
	}
	*value = Secret(data)
	return nil
}

func readSecretFile(field, path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", field, err)
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}

func (c *Config) resolveSecrets() error {
	var errs []error
	if g := c.Forges.Gitea; g != nil {
		errs = append(errs,
			secretField("forges.gitea.token", &g.Token, &g.TokenFile),
			secretField("forges.gitea.webhook_secret", &g.WebhookSecret, &g.WebhookSecretFile))
	}
	if g := c.Forges.GitHub; g != nil {
		errs = append(errs,
			secretField("forges.github.token", &g.Token, &g.TokenFile),
			secretField("forges.github.webhook_secret", &g.WebhookSecret, &g.WebhookSecretFile))
		if g.PrivateKeyFile != "" {
			path, err := expandEnv("forges.github.private_key_file", g.PrivateKeyFile)
			if err == nil {
				g.PrivateKeyFile = path
				var key string
				key, err = readSecretFile("forges.github.private_key_file", path)
				g.PrivateKey = Secret(key)
			}
			errs = append(errs, err)
		}
	}
	dsn, err := expandEnv("store.dsn", string(c.Store.DSN))
	c.Store.DSN = Secret(dsn)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// Validate checks the whole configuration and names every bad field.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("listen", "%q is not host:port", c.Listen)
	}
	if c.PublicURL != "" && !httpURL(c.PublicURL) {
		bad("public_url", "%q is not an absolute http(s) URL", c.PublicURL)
	}

	if c.Forges.Gitea == nil && c.Forges.GitHub == nil {
		bad("forges", "configure at least one of gitea, github")
	}
	if g := c.Forges.Gitea; g != nil {
		if !httpURL(g.BaseURL) {
			bad("forges.gitea.base_url", "%q is not an absolute http(s) URL", g.BaseURL)
		}
		if g.Token == "" {
			bad("forges.gitea.token", "empty (set token or token_file)")
		}
		if g.WebhookSecret == "" {
			bad("forges.gitea.webhook_secret", "empty: refusing to accept unsigned deliveries (set webhook_secret or webhook_secret_file)")
		}
	}
	if g := c.Forges.GitHub; g != nil {
		if g.APIURL != "" && !httpURL(g.APIURL) {
			bad("forges.github.api_url", "%q is not an absolute http(s) URL", g.APIURL)
		}
		app := g.AppID != 0 || g.InstallationID != 0 || g.PrivateKeyFile != ""
		switch {
		case app && g.Token != "":
			bad("forges.github", "set either app_id/installation_id/private_key_file or token, not both")
		case app:
			if g.AppID <= 0 {
				bad("forges.github.app_id", "must be a positive GitHub App id")
			}
			if g.InstallationID <= 0 {
				bad("forges.github.installation_id", "must be a positive installation id")
			}
			if g.PrivateKey == "" {
				bad("forges.github.private_key_file", "empty or unset")
			}
		case g.Token == "":
			bad("forges.github", "set app_id, installation_id and private_key_file, or token")
		}
		if g.WebhookSecret == "" {
			bad("forges.github.webhook_secret", "empty: refusing to accept unsigned deliveries (set webhook_secret or webhook_secret_file)")
		}
	}

	if len(c.Repositories) == 0 {
		bad("repositories", "list at least one repository to serve")
	}
	seen := map[string]int{}
	for i, r := range c.Repositories {
		field := fmt.Sprintf("repositories[%d]", i)
		switch r.Forge {
		case forge.Gitea:
			if c.Forges.Gitea == nil {
				bad(field+".forge", "gitea is not configured under forges")
			}
		case forge.GitHub:
			if c.Forges.GitHub == nil {
				bad(field+".forge", "github is not configured under forges")
			}
		default:
			bad(field+".forge", "%q: must be gitea or github", r.Forge)
		}
		if !repoPart(r.Owner) {
			bad(field+".owner", "%q is not a repository owner", r.Owner)
		}
		if !repoPart(r.Name) {
			bad(field+".name", "%q is not a repository name", r.Name)
		}
		key := strings.ToLower(string(r.Forge) + ":" + r.Owner + "/" + r.Name)
		if j, dup := seen[key]; dup {
			bad(field, "duplicates repositories[%d]", j)
		}
		seen[key] = i
	}

	if p, err := forge.ParsePermission(c.Trust.MinPermission); err != nil {
		bad("trust.min_permission", "%q: want triage, write, maintain or admin", c.Trust.MinPermission)
	} else if p < forge.PermTriage {
		bad("trust.min_permission", "%q would trust every reader of a public repository; want triage, write, maintain or admin", c.Trust.MinPermission)
	}
	for i, l := range c.Trust.Allow {
		if strings.TrimSpace(l) == "" || strings.ContainsAny(l, " \t\n/") {
			bad(fmt.Sprintf("trust.allow[%d]", i), "%q is not a login", l)
		}
	}

	for i, g := range c.Protected {
		if g == "" || !doublestar.ValidatePattern(g) {
			bad(fmt.Sprintf("protected[%d]", i), "%q is not a valid glob", g)
		}
	}
	for name, tc := range c.Toolchains {
		field := "toolchains." + name
		if name == "" || strings.ContainsAny(name, " \t\n/=,") {
			bad("toolchains", "%q is not a toolchain name", name)
		}
		if len(tc.Paths) == 0 {
			bad(field+".paths", "list at least one host directory")
		}
		for i, p := range append(append([]string(nil), tc.Paths...), tc.Bin...) {
			if !filepath.IsAbs(p) || filepath.Clean(p) == "/" {
				bad(fmt.Sprintf("%s.paths[%d]", field, i), "%q must be an absolute directory other than /", p)
			}
		}
		for k := range tc.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				bad(field+".env", "%q is not a variable name", k)
			}
		}
	}
	if c.Limits.Pids < 0 {
		bad("limits.pids", "%d must be positive", c.Limits.Pids)
	}

	if c.Workers < 1 || c.Workers > maxWorkers {
		bad("workers", "%d: want 1..%d", c.Workers, maxWorkers)
	}
	if d := time.Duration(c.JobTimeout); d < 10*time.Second || d > 48*time.Hour {
		bad("job_timeout", "%s: want 10s..48h", d)
	}
	if c.MaxDeliveriesPerPeer < 0 {
		bad("max_deliveries_per_peer", "%d: want 0 (no bound) or more", c.MaxDeliveriesPerPeer)
	}
	if c.FetchCache == "" {
		bad("fetch_cache", "empty")
	}
	switch c.Store.Driver {
	case StoreSQLite:
		if c.Store.Path == "" {
			bad("store.path", "empty: name the SQLite database file")
		}
	case StorePostgres:
		if c.Store.DSN == "" {
			bad("store.dsn", "empty: the postgres driver needs a connection string")
		}
	default:
		bad("store.driver", "%q: want sqlite or postgres", c.Store.Driver)
	}
	if c.SigningKey == "" {
		bad("signing_key", "empty: name the receipt signing key file")
	}
	if c.WorkRoot != "" && !filepath.IsAbs(c.WorkRoot) {
		bad("work_root", "%q must be an absolute path", c.WorkRoot)
	}
	switch c.Sandbox.Mode {
	case "", ModeIsolated, ModeTrustedDevelopment:
	default:
		bad("sandbox.mode", "%q: want %s (the default) or %s", c.Sandbox.Mode, ModeIsolated, ModeTrustedDevelopment)
	}
	return errors.Join(errs...)
}

// SandboxMode is the sandbox mode the configuration selects: isolated
// unless `sandbox.mode: trusted-development` was written.
func (c Config) SandboxMode() sandbox.Mode {
	if c.Sandbox.Mode == ModeTrustedDevelopment {
		return sandbox.ModeTrustedDevelopment
	}
	return sandbox.ModeIsolated
}

// SandboxConfig is the sandbox configuration these settings describe, over
// sandbox.DefaultConfig.
func (c Config) SandboxConfig() sandbox.Config {
	sc := sandbox.DefaultConfig()
	if c.Sandbox.Bwrap != "" {
		sc.Bwrap = c.Sandbox.Bwrap
	}
	if c.WorkRoot != "" {
		sc.WorkRoot = c.WorkRoot
	}
	sc.Mode = c.SandboxMode()
	sc.Max = gate.Limits{Memory: int64(c.Limits.Memory), Pids: c.Limits.Pids, Tmp: int64(c.Limits.Tmp), Output: int64(c.Limits.Output)}
	if len(c.Toolchains) > 0 {
		sc.Toolchains = make(map[string]sandbox.Toolchain, len(c.Toolchains))
		for name, tc := range c.Toolchains {
			sc.Toolchains[name] = sandbox.Toolchain{Paths: tc.Paths, Env: tc.Env, Bin: tc.Bin}
		}
	}
	return sc
}

// Policy is the gate policy these settings describe.
func (c Config) Policy() gate.Policy {
	p := gate.DefaultPolicy()
	p.Protected = append([]string(nil), c.Protected...)
	return p
}

// TrustPolicy is the Trust the trust section describes; call it only on a
// validated Config.
func (c Config) TrustPolicy() Trust {
	p, err := forge.ParsePermission(c.Trust.MinPermission)
	if err != nil || p < forge.PermTriage {
		p = forge.PermAdmin // unreachable after Validate; fail towards less trust
	}
	return Trust{MinPermission: p, Allow: append([]string(nil), c.Trust.Allow...)}
}

func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// repoPart reports whether s can be a repository owner or name on a forge.
func repoPart(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || '0' <= r && r <= '9' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z') {
			return false
		}
	}
	return true
}
