package console_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/internal/auth"
	iwfserver "github.com/iwf-server/iwf-server/internal/server"
	"github.com/iwf-server/iwf-server/internal/store/sqlite"
)

// chromiumPath is where Debian's chromium package installs the browser.
const chromiumPath = "/usr/bin/chromium"

// newBrowser starts a headless Chromium for one test, with a fresh profile
// and nothing that reaches the network by itself. Without Chromium the test
// is skipped, except in CI (env CI set), where it fails.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil {
			path = p
		} else if os.Getenv("CI") != "" {
			t.Fatal("CI needs chromium: apt-get install chromium")
		} else {
			t.Skip("browser tests skipped: no chromium at " + chromiumPath + " (apt-get install chromium)")
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// Start the browser now, so that its start-up is not charged to a step.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// Clicks that submit a form or follow a link start a navigation, and so
// does the console's auto-refresh. A chromedp query by node ids that runs
// while the old document goes fails ("Could not find node with given id",
// chromedp issue 1001). So the browser tests click what navigates, and wait
// for what a navigation brings, by script: a poll that runs during a
// navigation fails, and the next one reads the new page.

// clickByScript clicks the element of the CSS selector sel.
func clickByScript(t *testing.T, ctx context.Context, what, sel string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(sel)+`).click(); true`)); err != nil {
		t.Fatalf("%s: clicking %s: %v", what, sel, err)
	}
}

// waitByScript polls the page until it has loaded and holds an element of
// every CSS selector of sels.
func waitByScript(t *testing.T, ctx context.Context, what string, sels ...string) {
	t.Helper()
	cond := `document.readyState === "complete"`
	for _, sel := range sels {
		cond += ` && document.querySelector(` + jsString(sel) + `) !== null`
	}
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](cond))
		if err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s not on the page: %v (last poll: %v)", what, strings.Join(sels, ", "), ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// navigateByClick clicks the element of sel and waits for the page that
// holds elements of until.
func navigateByClick(t *testing.T, ctx context.Context, what, sel string, until ...string) {
	t.Helper()
	clickByScript(t, ctx, what, sel)
	waitByScript(t, ctx, what, until...)
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestBrowserSignalFlow drives the console in a real browser: the list shows
// a running workflow (and, by auto-refresh, one started after the page
// loaded), its page shows the pending signal, the signal form (confirmed)
// delivers the signal, and the page shows the run COMPLETED with its result.
func TestBrowserSignalFlow(t *testing.T) {
	browser := newBrowser(t)
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, kind)
			first, second := "order-"+kind+"-1", "order-"+kind+"-2"
			e.start(t, first)
			waitStatus(t, e, first, iwfapi.WorkflowStatusRunning)

			tab, cancelTab := chromedp.NewContext(browser)
			defer cancelTab()
			if err := chromedp.Do(tab); err != nil { // opens the tab
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(tab, 90*time.Second)
			defer cancel()
			css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
			row := func(id string) string { return `tr[data-workflow-id="` + id + `"]` }
			do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
				t.Helper()
				began := time.Now()
				if err := chromedp.Do(ctx, steps...); err != nil {
					d, derr := e.eng.DescribeWorkflow(context.Background(), iwfapi.WorkflowDescribeRequest{WorkflowId: first})
					t.Fatalf("%s: %v (run %s: %+v %v)", what, err, first, d, derr)
				}
				t.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
			}
			text := func(sel string) string {
				t.Helper()
				s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
				if err != nil {
					t.Fatalf("text of %s: %v", sel, err)
				}
				return s
			}
			eval := func(js string) {
				t.Helper()
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js+"; true")); err != nil {
					t.Fatalf("%s: %v", js, err)
				}
			}
			do("open the list", chromedp.Navigate(e.url+"/ui/"))
			waitByScript(t, ctx, "open the list", row(first))
			e.start(t, second)
			waitByScript(t, ctx, "auto-refresh shows a new run", row(second))
			eval(`localStorage.setItem("iwf-console-autorefresh", "off")`)
			do("reload without auto-refresh", chromedp.Reload())
			waitByScript(t, ctx, "reload without auto-refresh", row(second))
			if got := text(row(first)); !strings.Contains(got, demoType) || !strings.Contains(got, "RUNNING") {
				t.Fatalf("list row: %q", got)
			}
			if kind == "sqlite" {
				screenshot(t, ctx, "list.png")
			}
			navigateByClick(t, ctx, "open the run", row(first)+" a.wf", `#status[data-status="RUNNING"]`)
			if got := text(`#pending`); !strings.Contains(got, "approval") || !strings.Contains(got, "WAITING_COMMANDS") {
				t.Fatalf("pending section: %q", got)
			}
			do("fill the signal form",
				chromedp.SendKeys(css(`#signal-channel`), "approval"),
				chromedp.SendKeys(css(`#signal-value`), `{"approved": true, "by": "ada"}`),
			)
			navigateByClick(t, ctx, "send the signal", `#signal-submit`, `#confirm`)
			if got := text(`.confirm`); !strings.Contains(got, `channel "approval"`) {
				t.Fatalf("confirmation: %q", got)
			}
			navigateByClick(t, ctx, "confirm", `#confirm`, `#flash`)
			if got := text(`#flash`); !strings.Contains(got, "Signal sent") {
				t.Fatalf("flash: %q", got)
			}
			eval(`localStorage.setItem("iwf-console-autorefresh", "on")`)
			do("reload with auto-refresh", chromedp.Reload())
			waitByScript(t, ctx, "auto-refresh shows the run completed", `#status[data-status="COMPLETED"]`)
			eval(`localStorage.setItem("iwf-console-autorefresh", "off")`)
			do("reload without auto-refresh", chromedp.Reload())
			waitByScript(t, ctx, "reload without auto-refresh", `#status[data-status="COMPLETED"]`)
			if got := text(`.io`); !strings.Contains(got, `"by": "ada"`) {
				t.Fatalf("results: %q", got)
			}
			if kind == "sqlite" {
				do("open a timeline row", chromedp.Click(css(`#timeline details.row:nth-of-type(2) summary`)))
				screenshot(t, ctx, "run.png")
			}
		})
	}
}

// screenshot saves a full-page screenshot to docs/console/ when
// IWF_CONSOLE_SCREENSHOTS=1.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("IWF_CONSOLE_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserSignInAndOut drives the sign-in page, the console behind it
// and its sign-out button in a real browser, through the server's whole
// handler (tokens on, hosts restricted): the browser's own Sec-Fetch-Site,
// Origin and cookies pass the same-origin and CSRF checks; after sign-out
// the console asks for the token again.
func TestBrowserSignInAndOut(t *testing.T) {
	browser := newBrowser(t)
	const token = "browser-token-0123456789"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "iwf.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	toks, err := auth.Load("", []string{token})
	if err != nil {
		t.Fatal(err)
	}
	logger := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	srv, err := iwfserver.New(st, iwfserver.Options{Auth: toks, RestrictHosts: true, NoMetrics: true, Logger: &logger})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler)
	t.Cleanup(hs.Close)

	tab, cancelTab := chromedp.NewContext(browser)
	defer cancelTab()
	if err := chromedp.Do(tab); err != nil {
		t.Fatal(err)
	}
	bctx, cancelB := context.WithTimeout(tab, 60*time.Second)
	defer cancelB()
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("the console sends to the sign-in page", chromedp.Navigate(hs.URL+"/ui/"), chromedp.WaitVisible(css(`#token`)))
	// The list page behind the sign-in reloads itself every few seconds
	// while auto-refresh is on: a reload between finding the sign-out
	// button and clicking it would take the button away. Off, as the
	// checkbox leaves it, for this origin.
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`localStorage.setItem("iwf-console-autorefresh", "off"); true`)); err != nil {
		t.Fatalf("turning auto-refresh off: %v", err)
	}
	do("type the token", chromedp.SendKeys(css(`#token`), token))
	navigateByClick(t, bctx, "sign in", `button[type=submit]`, `#signout`)
	if n := toks.Sessions(); n != 1 {
		t.Fatalf("%d sessions after sign-in", n)
	}
	navigateByClick(t, bctx, "sign out", `#signout`, `#token`)
	if n := toks.Sessions(); n != 0 {
		t.Fatalf("%d sessions after sign-out", n)
	}
	do("the console asks again", chromedp.Navigate(hs.URL+"/ui/"), chromedp.WaitVisible(css(`#token`)))
}

// TestBrowserBatchTerminate drives "apply to all matching" in a real
// browser on both stores: a search, the batch form, the confirmation page
// with the count, then the batch page, which refreshes itself until it
// shows every matching run done.
func TestBrowserBatchTerminate(t *testing.T) {
	browser := newBrowser(t)
	for _, kind := range stores {
		t.Run(kind, func(t *testing.T) {
			e := newEnv(t, kind)
			ids := []string{"sweep-1", "sweep-2", "sweep-3", "sweep-4"}
			for _, id := range ids {
				e.start(t, id)
				waitStatus(t, e, id, iwfapi.WorkflowStatusRunning)
			}
			tab, cancelTab := chromedp.NewContext(browser)
			defer cancelTab()
			if err := chromedp.Do(tab); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(tab, 90*time.Second)
			defer cancel()
			css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
			do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
				t.Helper()
				began := time.Now()
				if err := chromedp.Do(ctx, steps...); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				t.Logf("%s: %s", what, time.Since(began).Round(time.Millisecond))
			}
			text := func(sel string) string {
				t.Helper()
				s, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
				if err != nil {
					t.Fatalf("text of %s: %v", sel, err)
				}
				return s
			}
			autorefresh := func(v string) {
				t.Helper()
				if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`localStorage.setItem("iwf-console-autorefresh", "`+v+`"); true`)); err != nil {
					t.Fatal(err)
				}
			}
			do("open the list", chromedp.Navigate(e.url+"/ui/"))
			waitByScript(t, ctx, "open the list", `#q`)
			// No reload of the list while the form is filled in; the batch
			// page refreshes itself once auto-refresh is on again.
			autorefresh("off")
			do("type the query", chromedp.SendKeys(css(`#q`), "WorkflowId STARTS_WITH 'sweep-'"))
			if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector("#q").form.requestSubmit(); true`)); err != nil {
				t.Fatalf("search: %v", err)
			}
			waitByScript(t, ctx, "search", `#batch-open`)
			if got := text(`#batch-open`); !strings.Contains(got, "Apply to all 4 matching") {
				t.Fatalf("batch summary: %q", got)
			}
			do("fill the batch form", chromedp.Click(css(`#batch-open`)), chromedp.WaitVisible(css(`#batch-reason`)),
				chromedp.SetValue(css(`#batch-operation`), "TERMINATE"),
				chromedp.SendKeys(css(`#batch-reason`), "bad deploy"))
			navigateByClick(t, ctx, "submit the batch form", `#batch-submit`, `#confirm`)
			got := text(`.confirm`)
			for _, want := range []string{"4 runs match the query now", "TERMINATE", "at most 50 runs per second", "STARTS_WITH 'sweep-'"} {
				if !strings.Contains(got, want) {
					t.Fatalf("confirmation lacks %q: %q", want, got)
				}
			}
			// The flash shows once: read it before the page refreshes.
			navigateByClick(t, ctx, "confirm", `#confirm`, `#batch-progress`)
			if got := text(`#flash`); !strings.Contains(got, "4 runs matched") {
				t.Fatalf("flash: %q", got)
			}
			autorefresh("on")
			do("reload with auto-refresh", chromedp.Reload())
			waitByScript(t, ctx, "the page refreshes until every run is done", `#batch-done[data-done="4"]`, `#batch-state[data-state="COMPLETED"]`)
			if got := text(`#batch-progress`); !strings.Contains(got, "4 done, 0 failed") {
				t.Fatalf("progress: %q", got)
			}
			for _, id := range ids {
				waitStatus(t, e, id, iwfapi.WorkflowStatusTerminated)
			}
			if kind == "sqlite" {
				screenshot(t, ctx, "batch.png")
			}
		})
	}
}
