package upgradetest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/iwf-server/iwf-server/internal/store/postgres/pgtest"
)

// pgDump dumps one schema as plain SQL that restore can run through pgx:
// rows as INSERT statements (no COPY ... FROM stdin), no owners or grants.
func pgDump(t *testing.T, url, schema string) []byte {
	t.Helper()
	cmd := exec.Command("pg_dump", "--dbname="+url, "--schema="+schema,
		"--no-owner", "--no-privileges", "--inserts", "--format=plain")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg_dump: %v: %s", err, stderr.String())
	}
	return out
}

// restore runs a dump written by pgDump with its schema renamed from `from`
// to `to`, and drops the new schema when the test ends.
func restore(t *testing.T, url, path, from, to string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	script := renameSchema(string(raw), from, to)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	t.Cleanup(func() { pgtest.DropSchema(t, url, to) })
	// Without arguments pgx runs the script with the simple protocol, all
	// statements in one implicit transaction.
	if _, err := conn.Exec(ctx, script); err != nil {
		t.Fatalf("restore %s: %v", path, err)
	}
}

// renameSchema rewrites every mention of the schema name from in a dump,
// and drops the psql meta-commands that newer pg_dump versions write
// (\restrict and \unrestrict lines), which are not SQL.
func renameSchema(dump, from, to string) string {
	var b strings.Builder
	for line := range strings.Lines(dump) {
		if strings.HasPrefix(line, `\`) {
			continue
		}
		b.WriteString(line)
	}
	return regexp.MustCompile(`\b`+regexp.QuoteMeta(from)+`\b`).ReplaceAllString(b.String(), to)
}
