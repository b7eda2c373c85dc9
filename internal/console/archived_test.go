package console_test

import (
	"context"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/archive"
	"github.com/iwf-server/iwf-server/internal/console"
)

// TestArchivedRunPage archives a run and deletes it with a real retention
// sweep (file:// archive), then reads its page back: the same timeline,
// history and diagram as its live page showed, paged the same way, marked
// archived, with no action; the list's lookup of its id links to it; an id
// in neither the store nor the archive is a 404; and a page with a history
// cap stops reading the archived object there.
func TestArchivedRunPage(t *testing.T) {
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			bucket, err := archive.Open(context.Background(), "file://"+t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { bucket.Close() })
			e := newEnvEngine(t, kind, func(o *console.Options) {
				o.RunPageSize = 10
				o.Archive = bucket
			}, engine.Config{
				WorkerClient:    loopWorker{rounds: 30, fan: 2}, // 30 loop executions and 58 work ones
				RetentionByType: map[string]time.Duration{loopType: time.Millisecond},
				SweepInterval:   time.Hour, // the test sweeps
				Archive:         bucket,
			})
			id := "arch-" + kind
			runID := e.runLoop(t, id)
			c := &http.Client{}
			page := func(u string) string {
				t.Helper()
				status, body := get(t, c, u)
				if status != http.StatusOK {
					t.Fatalf("GET %s: %d\n%.2000s", u, status, body)
				}
				return body
			}
			older := func(body, list string) string {
				t.Helper()
				m := regexp.MustCompile(`id="older-` + list + `" href="([^"]+)"`).FindStringSubmatch(body)
				if m == nil {
					t.Fatalf("no link to older %s", list)
				}
				return e.url + html.UnescapeString(m[1])
			}
			live := page(e.url + "/ui/workflows/" + id)
			liveOlder := page(older(live, "executions"))
			liveHistory := page(older(live, "history"))

			ctx := context.Background()
			st, err := e.eng.Sweep(ctx)
			if err != nil || st.Archived != 1 || st.Deleted != 1 {
				t.Fatalf("sweep: %+v, %v", st, err)
			}
			if _, err := e.eng.DescribeWorkflow(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: id}); engine.CodeOf(err) != engine.CodeWorkflowNotExists {
				t.Fatalf("the swept run is still in the store: %v", err)
			}

			archived := page(e.url + "/ui/workflows/" + id)
			for _, want := range []string{
				`id="archived-note"`, `<span class="badge archived">archived</span>`, runID,
				"showing 10 of 88 state executions (#79–#88), newest first · 78 older",
				"<title>loop: 30 execution(s)</title>", "<title>work: 58 execution(s)</title>",
				`data-status="COMPLETED"`,
			} {
				if !strings.Contains(archived, want) {
					t.Errorf("the archived page lacks %q", want)
				}
			}
			for _, unwanted := range []string{`id="actions"`, `<form method="post"`, `id="buffers"`, `id="autorefresh"`} {
				if strings.Contains(archived, unwanted) {
					t.Errorf("the archived page has %q", unwanted)
				}
			}
			if strings.Contains(live, `id="archived-note"`) {
				t.Error("the live page says it is archived")
			}
			// The same lists as the live page, and their older pages.
			if a, l := rowIDs(archived), rowIDs(live); len(a) != 10 || !reflect.DeepEqual(a, l) {
				t.Errorf("archived timeline %v, live %v", a, l)
			}
			if a, l := historyIDs(archived), historyIDs(live); len(a) != 10 || !reflect.DeepEqual(a, l) {
				t.Errorf("archived history %v, live %v", a, l)
			}
			if a, l := edges(archived), edges(live); len(a) == 0 || !reflect.DeepEqual(a, l) {
				t.Errorf("archived diagram edges %v, live %v", a, l)
			}
			olderURL := older(archived, "executions")
			if u, _ := url.Parse(olderURL); u.Query().Get("run") != runID {
				t.Errorf("the older link %s does not name the run", olderURL)
			}
			archivedOlder := page(olderURL)
			if a, l := rowIDs(archivedOlder), rowIDs(liveOlder); len(a) != 10 || !reflect.DeepEqual(a, l) || !strings.Contains(archivedOlder, "(#69–#78)") {
				t.Errorf("archived older timeline %v, live %v", a, l)
			}
			archivedHistory := page(older(archived, "history"))
			if a, l := historyIDs(archivedHistory), historyIDs(liveHistory); len(a) != 10 || !reflect.DeepEqual(a, l) {
				t.Errorf("archived older history %v, live %v", a, l)
			}
			// The run named explicitly.
			if byRun := page(e.url + "/ui/workflows/" + id + "?run=" + url.QueryEscape(runID)); !reflect.DeepEqual(rowIDs(byRun), rowIDs(archived)) {
				t.Errorf("the archived page by run id differs")
			}

			// The list finds the id in the archive.
			list := page(e.url + "/ui/?q=" + url.QueryEscape("WorkflowId = '"+id+"'"))
			if !strings.Contains(list, `id="archived-lookup"`) || !strings.Contains(list, "/ui/workflows/"+id+"?run="+runID) {
				t.Errorf("the list does not link to the archived run:\n%.3000s", list)
			}
			if other := page(e.url + "/ui/?q=" + url.QueryEscape("WorkflowId = 'nowhere'")); strings.Contains(other, `id="archived-lookup"`) {
				t.Error("the list links to an archived run of an id never started")
			}
			if status, _ := get(t, c, e.url+"/ui/workflows/nowhere"); status != http.StatusNotFound {
				t.Errorf("an id in neither the store nor the archive: %d", status)
			}
			if status, _ := get(t, c, e.url+"/ui/workflows/"+id+"?run=no-such-run"); status != http.StatusNotFound {
				t.Errorf("a run in neither the store nor the archive: %d", status)
			}

			// A console that reads at most 50 events of a history stops
			// reading the object there and says so.
			capped, err := console.New(e.eng, console.Options{RunPageSize: 10, MaxHistoryEvents: 50, Archive: bucket})
			if err != nil {
				t.Fatal(err)
			}
			rec := httptest.NewRecorder()
			capped.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/workflows/"+id, nil))
			if body := rec.Body.String(); rec.Code != http.StatusOK || !strings.Contains(body, "Raw history (50 events or more)") {
				t.Errorf("capped archived page: %d\n%.2000s", rec.Code, body)
			}
		})
	}
}

// edges returns the transitions of a run page's diagram with their count
// labels, in page order.
func edges(body string) []string {
	return regexp.MustCompile(`<path class="edge" d="[^"]*" marker-end="url\(#arrow\)"/>(?:<text class="count"[^>]*>[^<]*</text>)?`).FindAllString(body, -1)
}
