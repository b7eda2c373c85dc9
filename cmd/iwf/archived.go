package main

// Archived runs: iwf workflow get|history --archived read a run that
// retention deleted from the archive it was written to (the server's
// --archive-url), when that is a file:// archive, read here directly
// (archivedoc.OpenLocal); the server is not asked. The command line links
// no cloud SDK: an s3://, gs:// or azblob:// archive is read by the server
// that writes it, whose console shows archived runs.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/url"
	"strconv"
	"strings"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/archivedoc"
)

// archiveFlags registers --archived and --archive-url on a subcommand.
func (c *cli) archiveFlags(fs *flag.FlagSet) (archived *bool, archiveURL *string) {
	archived = fs.Bool("archived", false, "read the run from the archive (--archive-url) instead of the server")
	// The environment is read when the flag is absent, not shown as the
	// flag's default: the URL may carry credentials.
	archiveURL = fs.String("archive-url", "", "with --archived: the archive's `URL`, as the server's --archive-url, a file:// one (env IWF_ARCHIVE_URL)")
	return archived, archiveURL
}

// openArchive opens the archive and resolves the run: runID, or the
// archived run of id that closed last. It returns the run id and how many
// runs of id are archived (0 when runID was given).
func (c *cli) openArchive(ctx context.Context, fs *flag.FlagSet, rawURL, id, runID string) (*archivedoc.Local, string, int, error) {
	if rawURL == "" {
		rawURL = c.getenv("IWF_ARCHIVE_URL")
	}
	if rawURL == "" {
		return nil, "", 0, usagef("%s: --archived needs --archive-url or IWF_ARCHIVE_URL", fs.Name())
	}
	if u, err := url.Parse(rawURL); err == nil && u.Scheme != "file" {
		return nil, "", 0, usagef("%s: iwf reads an archive at a file:// URL only, not at %s:// (it links no cloud SDK); "+
			"the server that writes the archive shows its runs: open %s in its console", fs.Name(), u.Scheme, c.consoleRunURL(id, runID))
	}
	b, err := archivedoc.OpenLocal(rawURL)
	if err != nil {
		return nil, "", 0, err
	}
	if runID != "" {
		return b, runID, 0, nil
	}
	newest, n, err := b.Newest(ctx, id)
	if err != nil {
		b.Close()
		return nil, "", 0, err
	}
	return b, newest, n, nil
}

// consoleRunURL is the page of a run, archived ones included, in the
// server's console (its run named when runID is not "").
func (c *cli) consoleRunURL(id, runID string) string {
	u := strings.TrimRight(c.server, "/") + "/ui/workflows/" + url.PathEscape(id)
	if runID != "" {
		u += "?run=" + url.QueryEscape(runID)
	}
	return u
}

// getArchived prints an archived run as get prints a run, with its type
// and times; with --json the archived summary.
func (c *cli) getArchived(ctx context.Context, fs *flag.FlagSet, rawURL, id, runID string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, runID, n, err := c.openArchive(ctx, fs, rawURL, id, runID)
	if err != nil {
		return err
	}
	defer b.Close()
	run, err := b.Read(ctx, id, runID, nil)
	if err != nil {
		return err
	}
	if c.json {
		return printValueJSON(c.stdout, run)
	}
	var kb kv
	kb.add("Workflow ID", run.WorkflowID)
	kb.add("Run ID", run.RunID)
	kb.add("Type", run.WorkflowType)
	kb.add("Status", run.Status)
	kb.add("Started", formatMillis(&run.StartedMs))
	kb.add("Closed", formatMillis(&run.ClosedMs))
	kb.add("Archived", formatMillis(&run.ArchivedMs))
	if n > 1 {
		kb.add("Archived runs", strconv.Itoa(n)+" (this is the last closed; --run-id picks another)")
	}
	kb.addIf("Error type", run.ErrorType)
	kb.addIf("Error message", run.ErrorMessage)
	if run.Input != nil {
		kb.add("Input", formatObject(archivedObject(run.Input)))
	}
	for _, r := range run.Results {
		kb.add("Result of "+r.CompletedStateExecutionID, formatObject(archivedObject(r.CompletedStateOutput)))
	}
	for _, a := range run.DataAttributes {
		kb.add("Data attribute "+deref(a.Key), formatObject(archivedObject(a.Value)))
	}
	for _, a := range run.SearchAttributes {
		kb.add("Search attribute "+deref(a.Key), searchValue(a))
	}
	kb.add("History events", strconv.Itoa(run.HistoryEvents))
	kb.write(c.stdout)
	return nil
}

// errEnough stops reading an archived history once a page is full.
var errEnough = errors.New("enough events")

// historyArchived prints an archived run's history as history prints a
// run's: after --after, at most --limit events unless --all, a page at a
// time.
func (c *cli) historyArchived(ctx context.Context, fs *flag.FlagSet, rawURL, id, runID string, after int64, limit int, all bool) error {
	if !all {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	b, runID, _, err := c.openArchive(ctx, fs, rawURL, id, runID)
	if err != nil {
		return err
	}
	defer b.Close()
	out := newHistoryPrinter(c)
	out.archived = true
	page := iwfapi.WorkflowHistoryResponse{WorkflowRunId: runID}
	printed, more, last := 0, false, after
	flush := func() error {
		if len(page.Events) == 0 && out.runID != "" {
			return nil
		}
		err := out.page(page)
		page.Events = page.Events[:0]
		return err
	}
	_, err = b.Read(ctx, id, runID, func(ev archivedoc.Event) error {
		if ev.EventID <= after {
			return nil
		}
		if !all && printed >= limit {
			more = true
			return errEnough
		}
		out, err := archivedEvent(ev)
		if err != nil {
			return err
		}
		page.Events = append(page.Events, out)
		printed++
		last = ev.EventID
		if len(page.Events) >= historyPage {
			return flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, errEnough) {
		return err
	}
	if err := flush(); err != nil {
		return err
	}
	return out.end(more, id, runID, last)
}

// archivedObject is an archived value as the API shows values.
func archivedObject(v *archivedoc.Value) *iwfapi.EncodedObject {
	if v == nil {
		return nil
	}
	return &iwfapi.EncodedObject{Data: v.Data, Encoding: v.Encoding, ExtPath: v.ExtPath, ExtStoreId: v.ExtStoreID}
}

// archivedEvent is an archived history event as the history API shows it.
func archivedEvent(ev archivedoc.Event) (iwfapi.WorkflowHistoryEvent, error) {
	out := iwfapi.WorkflowHistoryEvent{EventId: ev.EventID, TimestampMs: ev.TimestampMs, EventType: ev.EventType}
	if ev.ExecutionID != "" {
		out.StateExecutionId = &ev.ExecutionID
	}
	if len(ev.Data) > 0 {
		if err := json.Unmarshal(ev.Data, &out.Data); err != nil {
			return out, errors.New("archive: reading the history: the data of event " + strconv.FormatInt(ev.EventID, 10) + " is not an object")
		}
	}
	return out, nil
}

// searchValue shows a search attribute's value.
func searchValue(a archivedoc.SearchAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntegerValue != nil:
		return strconv.FormatInt(*a.IntegerValue, 10)
	case a.DoubleValue != nil:
		return strconv.FormatFloat(*a.DoubleValue, 'g', -1, 64)
	case a.BoolValue != nil:
		return strconv.FormatBool(*a.BoolValue)
	case a.StringArrayValue != nil:
		return strings.Join(*a.StringArrayValue, ",")
	}
	return "-"
}
