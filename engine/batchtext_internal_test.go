package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestBatchFailureClipped: the reason stored with a failed item is at most
// maxBatchFailureBytes, cut on a character boundary.
func TestBatchFailureClipped(t *testing.T) {
	long := Errorf(CodeInvalidArgument, "%s", strings.Repeat("é", 4<<10))
	got := batchFailure(long)
	if len(got) > maxBatchFailureBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Fatalf("failure of %d bytes (valid UTF-8 %v): %.40q…", len(got), utf8.ValidString(got), got)
	}
	if short := batchFailure(Errorf(CodeInvalidArgument, "run r is already closed")); short != "run r is already closed" {
		t.Fatalf("a short failure became %q", short)
	}
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"abc", 3, "abc"}, {"abcd", 3, "…"}, {"abcdef", 5, "ab…"}, {"ééé", 6, "ééé"}, {"éééé", 6, "é…"},
	} {
		if got := clip(c.in, c.max); got != c.want || len(got) > c.max {
			t.Errorf("clip(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
