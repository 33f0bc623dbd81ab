package bot

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// dialect is what differs between the SQL databases the store runs on:
// placeholders and the DDL of vouch's own tables.
type dialect struct {
	name string
	// dollar is true when placeholders are $1, $2... rather than ?.
	dollar bool
	schema []string
}

// rebind rewrites the ? placeholders of q for d. vouch's queries hold no
// literal question marks.
func (d dialect) rebind(q string) string {
	if !d.dollar {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// schema is vouch's tables in SQLite's words; postgresSchema derives
// PostgreSQL's from it, so the two cannot drift apart. Times are stamp
// strings, so they sort and compare as text in both databases.
var schema = []string{`
CREATE TABLE IF NOT EXISTS vouch_delivery (
	forge       TEXT    NOT NULL,
	delivery    TEXT    NOT NULL,
	received_at TEXT    NOT NULL,
	job_kind    TEXT    NOT NULL,
	PRIMARY KEY (forge, delivery)
) STRICT`, `
CREATE TABLE IF NOT EXISTS vouch_run (
	id          INTEGER NOT NULL PRIMARY KEY,
	forge       TEXT    NOT NULL,
	repo        TEXT    NOT NULL,
	pr          INTEGER NOT NULL,
	head        TEXT    NOT NULL,
	base        TEXT    NOT NULL,
	title       TEXT    NOT NULL,
	state       TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	reason      TEXT    NOT NULL,
	receipt     BLOB,
	envelope    BLOB,
	log         BLOB,
	created_at  TEXT    NOT NULL,
	finished_at TEXT    NOT NULL,
	posted_at   TEXT    NOT NULL
) STRICT`,
	`CREATE INDEX IF NOT EXISTS vouch_run_pr ON vouch_run (forge, repo, pr, head)`, `
CREATE TABLE IF NOT EXISTS vouch_comment (
	forge      TEXT    NOT NULL,
	repo       TEXT    NOT NULL,
	pr         INTEGER NOT NULL,
	head       TEXT    NOT NULL,
	comment_id INTEGER NOT NULL,
	collapsed  INTEGER NOT NULL,
	PRIMARY KEY (forge, repo, pr, head)
) STRICT`, `
CREATE TABLE IF NOT EXISTS vouch_reply (
	forge      TEXT    NOT NULL,
	repo       TEXT    NOT NULL,
	comment_id INTEGER NOT NULL,
	PRIMARY KEY (forge, repo, comment_id)
) STRICT`, `
CREATE TABLE IF NOT EXISTS vouch_approval (
	forge       TEXT    NOT NULL,
	repo        TEXT    NOT NULL,
	pr          INTEGER NOT NULL,
	head        TEXT    NOT NULL,
	by_login    TEXT    NOT NULL,
	comment_id  INTEGER NOT NULL,
	approved_at TEXT    NOT NULL,
	PRIMARY KEY (forge, repo, pr, head)
) STRICT`,
}

var sqliteDialect = dialect{name: "sqlite", schema: schema}

var postgresDialect = dialect{name: "postgres", dollar: true, schema: postgresSchema(schema)}

// postgresSchema rewrites SQLite DDL for PostgreSQL: 64-bit integers,
// byte arrays, and no STRICT (PostgreSQL's columns are always typed).
func postgresSchema(sqlite []string) []string {
	r := strings.NewReplacer("INTEGER", "BIGINT", "BLOB", "BYTEA", ") STRICT", ")")
	out := make([]string, len(sqlite))
	for i, stmt := range sqlite {
		out[i] = r.Replace(stmt)
	}
	return out
}

// stampLayout is a fixed-width UTC time, so stamps sort as text.
const stampLayout = "2006-01-02T15:04:05.000000000Z"

// stamp formats t for the database.
func stamp(t time.Time) string { return t.UTC().Format(stampLayout) }

// unstamp parses a stamp; "" is the zero time.
func unstamp(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(stampLayout, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// lockFile takes an exclusive lock on path (created 0600) for the life of
// the process, or fails at once when another process holds it.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: another vouch serve uses this store (%w)", path, err)
	}
	return func() { f.Close() }, nil
}
