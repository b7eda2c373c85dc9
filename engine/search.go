package engine

// Search (POST /api/v1/workflow/search): the engine's side. The language
// — parsing, typing, the query the store executes — is package search; the
// engine resolves custom and system attribute names, runs the query in a
// snapshot and turns the store's cursor into a nextPageToken.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/search"
)

// DefaultSearchPageSize is the page size of a search request whose pageSize
// is absent or not positive; a larger one is lowered to MaxPageSize.
const DefaultSearchPageSize = MaxPageSize

// SearchWorkflows answers POST /api/v1/workflow/search.
func (e *Engine) SearchWorkflows(ctx context.Context, req iwfapi.WorkflowSearchRequest) (iwfapi.WorkflowSearchResponse, error) {
	var resp iwfapi.WorkflowSearchResponse
	pq, err := search.Parse(req.Query)
	if err != nil {
		return resp, searchError(err)
	}
	size := pageSize(req.PageSize, DefaultSearchPageSize)
	cursor, err := decodeSearchToken(deref(req.NextPageToken), req.Query)
	if err != nil {
		return resp, err
	}
	// A slot first: at most MaxSearches run at once, so that searches
	// cannot take every database connection (or core) from the rest.
	select {
	case e.searching <- struct{}{}:
		defer func() { <-e.searching }()
	case <-ctx.Done():
		return resp, &Error{Code: CodeDeadlineExceeded, Err: ctx.Err(),
			Message: fmt.Sprintf("the request ran out of time waiting for one of the %d searches in flight to end", cap(e.searching))}
	}
	var page *search.Page
	err = e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		q, err := search.Compile(ctx, pq, attributeResolver{declared: e.cfg.SearchAttributeTypes, store: tx}, e.cfg.Clock.Now())
		if err != nil {
			return searchError(err)
		}
		q.Limit, q.Cursor = size, cursor
		page, err = tx.RunSearch(ctx, q)
		return err
	})
	if errors.Is(err, search.ErrInvalidCursor) {
		return resp, Errorf(CodeInvalidArgument, "invalid nextPageToken")
	}
	if err != nil {
		return resp, err
	}
	entries := make([]iwfapi.WorkflowSearchResponseEntry, 0, len(page.Runs))
	for _, r := range page.Runs {
		entries = append(entries, iwfapi.WorkflowSearchResponseEntry{WorkflowId: r.WorkflowID, WorkflowRunId: r.RunID})
	}
	resp.WorkflowExecutions = &entries
	resp.NextPageToken = ptr(encodeSearchToken(page.Cursor, req.Query))
	return resp, nil
}

// searchError turns a query the language rejects into a 400 with its
// message; other errors pass through.
func searchError(err error) error {
	var se *search.Error
	if errors.As(err, &se) {
		return Errorf(CodeInvalidArgument, "%s", se.Error())
	}
	return err
}

// attributeResolver resolves the attribute names of a query that are not
// built-in fields: the system attributes, then the declared types, then
// the type last written in the store.
type attributeResolver struct {
	declared map[string]search.ValueType
	store    interface {
		SearchAttributeTypeOf(ctx context.Context, key string) (search.ValueType, error)
	}
}

// Resolve implements search.Resolver.
func (r attributeResolver) Resolve(ctx context.Context, name string) (search.Field, error) {
	switch name {
	case SystemSAWorkflowType:
		// IwfWorkflowType is the run's type, which the run row holds.
		return search.Field{Builtin: search.BuiltinWorkflowType, Type: search.Keyword}, nil
	case SystemSAExecutingStateIDs:
		return search.Field{Key: name, Type: search.KeywordArray}, nil
	case systemSAGlobalVersion:
		return search.Field{Key: name, Type: search.Int}, nil
	case SystemSAPaused:
		return search.Field{Key: name, Type: search.Bool}, nil
	}
	if t, ok := r.declared[name]; ok {
		return search.Field{Key: name, Type: t}, nil
	}
	t, err := r.store.SearchAttributeTypeOf(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return search.Field{}, search.ErrUnknownAttribute
	}
	return search.Field{Key: name, Type: t}, err
}

// searchToken is the content of a nextPageToken: the store's cursor and a
// hash of the query it belongs to.
type searchToken struct {
	Query  string `json:"q"`
	Cursor string `json:"c"`
}

func queryHash(query string) string {
	h := fnv.New64a()
	h.Write([]byte(query))
	return strconv.FormatUint(h.Sum64(), 16)
}

// encodeSearchToken returns the nextPageToken for a store cursor; "" when
// the cursor is "" (no more runs).
func encodeSearchToken(cursor, query string) string {
	if cursor == "" {
		return ""
	}
	b, _ := json.Marshal(searchToken{Query: queryHash(query), Cursor: cursor})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeSearchToken returns the store cursor of a nextPageToken ("" for the
// first page). A token of another query is rejected.
func decodeSearchToken(token, query string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	var t searchToken
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	if err != nil || t.Cursor == "" {
		return "", Errorf(CodeInvalidArgument, "invalid nextPageToken")
	}
	if t.Query != queryHash(query) {
		return "", Errorf(CodeInvalidArgument, "nextPageToken belongs to another query")
	}
	return t.Cursor, nil
}
