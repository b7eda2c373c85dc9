package crashtest

import (
	"strings"
	"testing"
)

// TestWarningsKeepsWhatWentWrong: of a log part cut from the test log, the
// warn and error lines are kept, the rest (info lines, a goroutine dump)
// left out, and the last ones kept when they are too many.
func TestWarningsKeepsWhatWentWrong(t *testing.T) {
	part := `{"level":"info","message":"request"}
{"level":"warn","task":7,"message":"a limit permit was lost: cancelling its call"}
goroutine 12 [running]:
{"level":"error","message":"renewing limit permits"}
`
	got := warnings(part)
	want := "[the 2 warn and error lines of the part cut:]\n" +
		`{"level":"warn","task":7,"message":"a limit permit was lost: cancelling its call"}` + "\n" +
		`{"level":"error","message":"renewing limit permits"}` + "\n"
	if got != want {
		t.Fatalf("warnings:\n%s\nwant:\n%s", got, want)
	}
	if got := warnings("{\"level\":\"info\"}\ngoroutine 1 [running]:\n"); got != "" {
		t.Fatalf("warnings of a part without any: %q, want none", got)
	}
	line := `{"level":"warn","message":"` + strings.Repeat("x", 1000) + `"}` + "\n"
	got = warnings(strings.Repeat(line, 100) + `{"level":"error","message":"last"}` + "\n")
	if len(got) > maxWarningBytes+100 || !strings.HasSuffix(got, `{"level":"error","message":"last"}`+"\n") {
		t.Fatalf("warnings of a long part: %d bytes, ends %q; want at most about %d, ending with the last line",
			len(got), got[max(0, len(got)-60):], maxWarningBytes)
	}
}
