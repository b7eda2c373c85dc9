package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// SearchBenchOptions configures BenchSearch.
type SearchBenchOptions struct {
	// Runs is the number of runs stored before measuring; default 100,000,
	// or IWF_SEARCH_BENCH_RUNS when set.
	Runs int
	// Explain, when set, returns the database's plan of a search; it is
	// logged once per query (go test -v).
	Explain func(ctx context.Context, q *search.Query) (string, error)
	// Analyze, when set, runs after the runs are stored and before the
	// measurements: for PostgreSQL, the ANALYZE that autovacuum runs soon
	// after a bulk load in production.
	Analyze func(ctx context.Context) error
}

// SearchBenchQuery is one query of BenchSearch: the query text it stands
// for and its typed form.
type SearchBenchQuery struct {
	Name  string
	Text  string
	Query search.Query
}

// benchBase is the start time of the first benchmark run.
var benchBase = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// SearchBenchQueries are the typical searches BenchSearch times, each on a
// page of 10 runs unless it says otherwise.
func SearchBenchQueries() []SearchBenchQuery {
	wfType, status := builtin(search.BuiltinWorkflowType), builtin(search.BuiltinStatus)
	kw, in, bl := field(saKeyword, search.Keyword), field(saInt, search.Int), field(saBool, search.Bool)
	dt, text, arr := field(saTime, search.Datetime), field("CustomStringField", search.Text), field(saArray, search.KeywordArray)
	page := func(f search.Expr) search.Query { return search.Query{Filter: f, Limit: 10} }
	return []SearchBenchQuery{
		{"TypeAndIntRange", "IwfWorkflowType='Type3' AND CustomIntField > 500",
			page(and(cond(wfType, search.Eq, "Type3"), cond(in, search.Gt, int64(500))))},
		{"TypeAndRareInt", "IwfWorkflowType='Type3' AND CustomIntField = 7",
			page(and(cond(wfType, search.Eq, "Type3"), cond(in, search.Eq, int64(7))))},
		{"Type", "IwfWorkflowType='Type3'", page(cond(wfType, search.Eq, "Type3"))},
		{"All", "(empty query)", page(nil)},
		{"KeywordEq", "CustomKeywordField='k-42'", page(cond(kw, search.Eq, "k-42"))},
		{"KeywordNoMatch", "CustomKeywordField='nope'", page(cond(kw, search.Eq, "nope"))},
		{"IntBetween", "CustomIntField BETWEEN 100 AND 110", page(cond(in, search.Between, int64(100), int64(110)))},
		{"DatetimeRange", "CustomDatetimeField BETWEEN <t> AND <t+1000s>",
			page(cond(dt, search.Between, benchBase.Add(50000*time.Second), benchBase.Add(51000*time.Second)))},
		{"StatusRunning", "ExecutionStatus='Running'", page(cond(status, search.Eq, string(engine.RunRunning)))},
		{"StatusFailed", "ExecutionStatus='Failed'", page(cond(status, search.Eq, string(engine.RunFailed)))},
		{"ArrayEq", "CustomKeywordArrayField='tag-7'", page(cond(arr, search.Eq, "tag-7"))},
		{"ExecutingStateIds", "IwfExecutingStateIds='S2'", page(cond(field(engine.SystemSAExecutingStateIDs, search.KeywordArray), search.Eq, "S2"))},
		{"TextWord", "CustomStringField='w42'", page(cond(text, search.Match, "w42"))},
		{"TextRareWords", "CustomStringField='w42 w43'", page(and(cond(text, search.Match, "w42"), cond(text, search.Match, "w43")))},
		{"WorkflowIdPrefix", "WorkflowId STARTS_WITH 'wf-4242'", page(cond(builtin(search.BuiltinWorkflowID), search.Prefix, "wf-4242"))},
		{"Or", "CustomKeywordField='k-1' OR CustomIntField=7",
			page(or(cond(kw, search.Eq, "k-1"), cond(in, search.Eq, int64(7))))},
		{"ThreeWayAnd", "CustomKeywordField='k-42' AND CustomBoolField=true AND IwfWorkflowType='Type2'",
			page(and(cond(kw, search.Eq, "k-42"), cond(bl, search.Eq, true), cond(wfType, search.Eq, "Type2")))},
		{"NotEq", "IwfWorkflowType='Type3' AND CustomKeywordField != 'k-1'",
			page(and(cond(wfType, search.Eq, "Type3"), negate(cond(kw, search.Eq, "k-1"))))},
		{"OrderByStartTime", "IwfWorkflowType='Type3' ORDER BY StartTime DESC",
			search.Query{Filter: cond(wfType, search.Eq, "Type3"), Order: search.Order{Field: builtin(search.BuiltinStartTime), Desc: true}, Limit: 10}},
		{"OrderByCustomInt", "IwfWorkflowType='Type3' ORDER BY CustomIntField DESC",
			search.Query{Filter: cond(wfType, search.Eq, "Type3"), Order: search.Order{Field: in, Desc: true}, Limit: 10}},
		{"Page1000", "(empty query), page size 1000", search.Query{Limit: 1000}},
	}
}

// BenchSearch stores opts.Runs runs with a few search attributes each, then
// times RunSearch for each of SearchBenchQueries, and a page deep into a
// search (DeepPage: the 5,000th page of 10 runs, through its cursor).
//
// Each run has IwfWorkflowType (one of 10 types), IwfExecutingStateIds (S1 or
// S2 while open, empty once closed), CustomKeywordField (one of 1,000),
// CustomIntField (0..999), CustomDoubleField, CustomBoolField,
// CustomDatetimeField (one second apart), CustomStringField (TEXT, 4 words of
// 200) and CustomKeywordArrayField (2 tags of 100). One run in ten is open;
// the others are closed with various statuses.
func BenchSearch(b *testing.B, s engine.Store, opts SearchBenchOptions) {
	n := opts.Runs
	if v, err := strconv.Atoi(os.Getenv("IWF_SEARCH_BENCH_RUNS")); err == nil && v > 0 {
		n = v
	}
	if n <= 0 {
		n = 100_000
	}
	ctx := context.Background()
	start := time.Now()
	fillSearchBench(b, s, n)
	b.Logf("stored %d runs with their search attributes in %s", n, time.Since(start).Round(time.Millisecond))
	if opts.Analyze != nil {
		if err := opts.Analyze(ctx); err != nil {
			b.Fatal(err)
		}
	}

	run := func(b *testing.B, q search.Query) {
		var found int
		for b.Loop() {
			if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
				p, err := tx.RunSearch(ctx, &q)
				if err == nil {
					found = len(p.Runs)
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(found), "runs/page")
	}
	for _, bq := range SearchBenchQueries() {
		b.Run(bq.Name, func(b *testing.B) {
			if opts.Explain != nil {
				plan, err := opts.Explain(ctx, &bq.Query)
				if err != nil {
					b.Fatal(err)
				}
				b.Logf("%s\n%s", bq.Text, plan)
			}
			run(b, bq.Query)
		})
	}
	b.Run("DeepPage", func(b *testing.B) {
		// Walk to the 5,000th page of 10 once (with pages of 1000), then
		// time fetching the page after it.
		q := search.Query{Limit: 1000}
		for i := 0; i < 50 && (i == 0 || q.Cursor != ""); i++ {
			if err := s.View(ctx, func(ctx context.Context, tx engine.ReadTx) error {
				p, err := tx.RunSearch(ctx, &q)
				if err == nil {
					q.Cursor = p.Cursor
				}
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		q.Limit = 10
		if opts.Explain != nil {
			plan, err := opts.Explain(ctx, &q)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("page after 50,000 runs\n%s", plan)
		}
		run(b, q)
	})
}

// fillSearchBench stores n runs in transactions of 1,000.
func fillSearchBench(b *testing.B, s engine.Store, n int) {
	rng := rand.New(rand.NewPCG(1, 2))
	words := make([]string, 200)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	statuses := []engine.RunStatus{engine.RunCompleted, engine.RunCompleted, engine.RunCompleted, engine.RunFailed,
		engine.RunTimeout, engine.RunTerminated, engine.RunCanceled, engine.RunCompleted, engine.RunCompleted}
	for lo := 0; lo < n; lo += 1000 {
		hi := min(n, lo+1000)
		err := s.Update(context.Background(), func(ctx context.Context, tx engine.Tx) error {
			for i := lo; i < hi; i++ {
				r := &engine.Run{
					RunID:        fmt.Sprintf("run-%08d", i),
					WorkflowID:   fmt.Sprintf("wf-%d", i),
					WorkflowType: fmt.Sprintf("Type%d", rng.IntN(10)),
					Status:       engine.RunRunning,
					StartedAt:    benchBase.Add(time.Duration(i) * time.Second),
					Data:         []byte(`{}`),
				}
				executing := arrayAttr(engine.SystemSAExecutingStateIDs)
				if i%10 == 0 {
					executing = arrayAttr(engine.SystemSAExecutingStateIDs, fmt.Sprintf("S%d", 1+rng.IntN(2)))
				} else {
					r.Status = statuses[rng.IntN(len(statuses))]
					r.ClosedAt = r.StartedAt.Add(time.Duration(1+rng.IntN(3600)) * time.Second)
				}
				if err := tx.RunInsert(ctx, r); err != nil {
					return err
				}
				text := make([]string, 4)
				for j := range text {
					text[j] = words[rng.IntN(len(words))]
				}
				if err := tx.SearchAttributeUpsert(ctx, r.RunID, []*engine.SearchAttribute{
					kwAttr(engine.SystemSAWorkflowType, r.WorkflowType),
					executing,
					kwAttr(saKeyword, fmt.Sprintf("k-%d", rng.IntN(1000))),
					intAttr(saInt, int64(rng.IntN(1000))),
					doubleAttr(saDouble, rng.Float64()*100),
					boolAttr(saBool, rng.IntN(2) == 0),
					timeAttr(saTime, benchBase.Add(time.Duration(i)*time.Second)),
					textAttr("CustomStringField", strings.Join(text, " ")),
					arrayAttr(saArray, fmt.Sprintf("tag-%d", rng.IntN(100)), fmt.Sprintf("tag-%d", rng.IntN(100))),
				}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
