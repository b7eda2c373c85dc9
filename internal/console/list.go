package console

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine"
)

// statuses are the run statuses the list can filter on, with the names the
// search language takes.
var statuses = []struct{ Value, Label string }{
	{"Running", "RUNNING"}, {"Completed", "COMPLETED"}, {"Failed", "FAILED"},
	{"Canceled", "CANCELED"}, {"Terminated", "TERMINATED"}, {"TimedOut", "TIMEOUT"},
}

// listPage is the data of the workflows page.
type listPage struct {
	Query, Status, Type string
	Statuses            []struct{ Value, Label string }
	// Search is the query sent to the search API.
	Search   string
	Rows     []listRow
	Page     int
	NextURL  string
	FirstURL string
	Error    string
	// ArchivedID, ArchivedURL and ArchivedRuns name the archived runs of
	// the workflow id the query names, when the store has none.
	ArchivedID, ArchivedURL string
	ArchivedRuns            int
	// BatchQuery, when set, is the filter of the search without its
	// order, which "apply to all matching" starts a batch over;
	// Matching says how many runs it matched ("3", "more than 25").
	BatchQuery, Matching string
	Operations           []struct{ Value, Label string }
	ResetTypes           []string
	DefaultRPS           int
}

// listRow is one run of the list.
type listRow struct {
	WorkflowID, RunID, Type, Status string
	Started, Closed                 time.Time
	Duration                        string
	URL                             string
	Error                           string
}

// list serves the workflows page: one search request for one page of runs,
// then a describe per run of that page (at most PageSize, a few at a time).
func (c *console) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lp := listPage{Query: strings.TrimSpace(q.Get("q")), Status: q.Get("status"), Type: strings.TrimSpace(q.Get("type")), Statuses: statuses}
	lp.Page, _ = strconv.Atoi(q.Get("page"))
	lp.Page = max(lp.Page, 1)
	lp.Search = composeQuery(lp.Query, lp.Status, lp.Type)
	token := q.Get("next")
	base := url.Values{}
	for k, v := range map[string]string{"q": lp.Query, "status": lp.Status, "type": lp.Type} {
		if v != "" {
			base.Set(k, v)
		}
	}
	lp.FirstURL = c.opts.Prefix + "?" + base.Encode()
	resp, err := c.be.SearchWorkflows(r.Context(), iwfapi.WorkflowSearchRequest{
		Query: lp.Search, PageSize: ptr(int32(c.opts.PageSize)), NextPageToken: &token,
	})
	status := http.StatusOK
	if err != nil {
		status, lp.Error = explain(err)
		if status == http.StatusInternalServerError {
			c.opts.Logger.Error().Err(err).Msg("console: search")
		}
	} else {
		lp.Rows = c.describeRows(r.Context(), deref(resp.WorkflowExecutions))
		if len(lp.Rows) == 0 && token == "" && lp.Status == "" && lp.Type == "" {
			lp.ArchivedID, lp.ArchivedURL, lp.ArchivedRuns = c.archivedLookup(r.Context(), lp.Query)
		}
		if f := batchFilter(lp.Query, lp.Status, lp.Type); f != "" && len(lp.Rows) > 0 {
			lp.BatchQuery, lp.Operations, lp.ResetTypes, lp.DefaultRPS = f, offeredOperations(r), resetTypes, engine.DefaultBatchRPS
			lp.Matching = strconv.Itoa(len(lp.Rows))
			if deref(resp.NextPageToken) != "" || token != "" {
				lp.Matching = "more than " + strconv.Itoa(len(lp.Rows))
			}
		}
		if t := deref(resp.NextPageToken); t != "" {
			next := url.Values{}
			for k, v := range base {
				next[k] = v
			}
			next.Set("next", t)
			next.Set("page", strconv.Itoa(lp.Page+1))
			lp.NextURL = c.opts.Prefix + "?" + next.Encode()
		}
	}
	c.render(w, r, status, "list", "Workflows", true, lp)
}

// describeRows describes the runs of one page, eight at a time.
func (c *console) describeRows(ctx context.Context, entries []iwfapi.WorkflowSearchResponseEntry) []listRow {
	rows := make([]listRow, len(entries))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, e := range entries {
		rows[i] = listRow{WorkflowID: e.WorkflowId, RunID: e.WorkflowRunId, URL: c.runURL(e.WorkflowId, e.WorkflowRunId)}
		wg.Add(1)
		sem <- struct{}{}
		go func(row *listRow) {
			defer func() { <-sem; wg.Done() }()
			d, err := c.describe(ctx, iwfapi.WorkflowDescribeRequest{WorkflowId: row.WorkflowID, WorkflowRunId: ptr(row.RunID)})
			if err != nil {
				_, row.Error = explain(err)
				return
			}
			row.Type, row.Status = d.WorkflowType, string(d.Status)
			row.Started = time.UnixMilli(d.StartedTimestampMs)
			end := c.opts.Now()
			if d.ClosedTimestampMs != nil {
				row.Closed = time.UnixMilli(*d.ClosedTimestampMs)
				end = row.Closed
			}
			row.Duration = humanDuration(end.Sub(row.Started))
		}(&rows[i])
	}
	wg.Wait()
	return rows
}

// batchFilter is the filter of composeQuery without its order: the query
// of a batch over the list's runs ("" when nothing narrows the list).
func batchFilter(query, status, wfType string) string {
	filter, _ := splitOrderBy(query)
	if filter == "" && status == "" && wfType == "" {
		return ""
	}
	q, _ := splitOrderBy(composeQuery(filter, status, wfType))
	return q
}

// composeQuery joins the free query with the status and type filters and,
// unless the query orders itself, orders newest first.
func composeQuery(query, status, wfType string) string {
	filter, order := splitOrderBy(query)
	var parts []string
	if filter != "" {
		parts = append(parts, "("+filter+")")
	}
	if status != "" {
		parts = append(parts, "ExecutionStatus="+quote(status))
	}
	if wfType != "" {
		parts = append(parts, "WorkflowType="+quote(wfType))
	}
	if order == "" {
		order = "ORDER BY StartTime DESC"
	}
	return strings.TrimSpace(strings.Join(parts, " AND ") + " " + order)
}

// quote writes a string literal of the search language.
func quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// splitOrderBy splits a query at an ORDER BY outside quotes.
func splitOrderBy(q string) (filter, order string) {
	var inQuote byte
	for i := 0; i < len(q); i++ {
		ch := q[i]
		switch {
		case inQuote != 0:
			if ch == inQuote {
				inQuote = 0
			} else if ch == '\\' && inQuote == '"' {
				i++
			}
		case ch == '\'' || ch == '"' || ch == '`':
			inQuote = ch
		case (ch == 'o' || ch == 'O') && (i == 0 || !isWordByte(q[i-1])):
			rest := q[i:]
			if len(rest) >= 5 && strings.EqualFold(rest[:5], "order") {
				after := strings.TrimLeft(rest[5:], " \t\r\n")
				if len(after) < len(rest)-5 && len(after) >= 2 && strings.EqualFold(after[:2], "by") && (len(after) == 2 || !isWordByte(after[2])) {
					return strings.TrimSpace(q[:i]), strings.TrimSpace(rest)
				}
			}
		}
	}
	return strings.TrimSpace(q), ""
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}

// runURL is the page of a run.
func (c *console) runURL(workflowID, runID string) string {
	u := c.opts.Prefix + "workflows/" + url.PathEscape(workflowID)
	if runID != "" {
		u += "?run=" + url.QueryEscape(runID)
	}
	return u
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
