package audit_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/internal/audit"
)

func lines(t *testing.T, path string) []audit.Entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Entry
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		var e audit.Entry
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		out = append(out, e)
	}
	return out
}

// Concurrent writers never interleave lines; the file is private; a
// reopen after a move writes on in a new file.
func TestLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				l.Write(audit.Entry{Time: time.Now(), Actor: fmt.Sprintf("g%d", g), Operation: "signal",
					WorkflowID: strings.Repeat("w", 3000), Outcome: "ok", Status: 200})
			}
		}()
	}
	wg.Wait()
	if got := lines(t, path); len(got) != 400 {
		t.Fatalf("%d lines, want 400", len(got))
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v %v", fi.Mode(), err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	l.Write(audit.Entry{Actor: "after", Operation: "stop", Outcome: "ok"})
	if got := lines(t, path); len(got) != 1 || got[0].Actor != "after" {
		t.Fatalf("after reopen: %+v", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	w := audit.NewWriter(&b)
	w.Write(audit.Entry{Actor: "x", Operation: "reset", WorkflowID: "w", Outcome: "forbidden"})
	if !strings.Contains(b.String(), `"runId":""`) || !strings.HasSuffix(b.String(), "}\n") || strings.Contains(b.String(), "batchId") {
		t.Fatalf("line %q", b.String())
	}
	// The client's request id is a field of its own, beside the server's.
	b.Reset()
	w.Write(audit.Entry{Actor: "x", Operation: "stop", RequestID: "srv-1", ClientRequestID: "cli-1"})
	if !strings.Contains(b.String(), `"requestId":"srv-1","clientRequestId":"cli-1"`) {
		t.Fatalf("line %q", b.String())
	}
	if _, err := audit.Open(filepath.Join(t.TempDir(), "no-dir", "a")); err == nil || !strings.Contains(err.Error(), "audit-log") {
		t.Fatalf("open in a missing directory: %v", err)
	}
}
