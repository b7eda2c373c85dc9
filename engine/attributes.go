package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
	"github.com/iwf-server/iwf-server/search"
)

// encodeValue turns an optional value into the stored JSON (nil for no
// value).
func encodeValue(v *record.Value) []byte {
	if v == nil {
		return nil
	}
	return encode(v)
}

// decodeValue reads a stored value; nil for none or an unreadable one.
func decodeValue(b []byte) *record.Value {
	if b == nil {
		return nil
	}
	var v record.Value
	if err := json.Unmarshal(b, &v); err != nil {
		return nil
	}
	return &v
}

func toStoreDataAttributes(kvs []record.KeyValue) ([]*Attribute, error) {
	out := make([]*Attribute, 0, len(kvs))
	for _, kv := range kvs {
		key := deref(kv.Key)
		if key == "" {
			return nil, Errorf(CodeInvalidArgument, "a data attribute needs a non-empty key")
		}
		if err := CheckName("data attribute key", key); err != nil {
			return nil, err
		}
		out = append(out, &Attribute{Key: key, Value: encodeValue(kv.Value)})
	}
	return out, nil
}

func fromStoreDataAttributes(attrs []*Attribute) []iwfapi.KeyValue {
	out := make([]iwfapi.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, iwfapi.KeyValue{Key: ptr(a.Key), Value: mapPtr(decodeValue(a.Value), valueOut)})
	}
	return out
}

func systemTypeAttribute(workflowType string) *SearchAttribute {
	sa := record.SearchAttribute{Key: ptr(SystemSAWorkflowType), ValueType: ptr(string(search.Keyword)), StringValue: ptr(workflowType)}
	return &SearchAttribute{Key: SystemSAWorkflowType, ValueType: search.Keyword, Raw: encode(sa), String: ptr(workflowType)}
}

func isSystemSearchAttribute(key string) bool {
	return key == SystemSAWorkflowType || key == SystemSAExecutingStateIDs || key == systemSAGlobalVersion || key == SystemSAPaused
}

// toStoreSearchAttributes validates search attributes and adds the typed
// value the index uses. now resolves relative DATETIME values. One write
// may name at most MaxSearchAttributesPerRun keys.
func (e *Engine) toStoreSearchAttributes(sas []record.SearchAttribute, now time.Time) ([]*SearchAttribute, error) {
	if len(sas) > MaxSearchAttributesPerRun {
		keys := make(map[string]bool, len(sas))
		for _, sa := range sas {
			keys[deref(sa.Key)] = true
		}
		if len(keys) > MaxSearchAttributesPerRun {
			return nil, tooManySearchAttributes(len(keys))
		}
	}
	out := make([]*SearchAttribute, 0, len(sas))
	for _, sa := range sas {
		a, err := e.toStoreSearchAttribute(sa, now)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

func (e *Engine) toStoreSearchAttribute(sa record.SearchAttribute, now time.Time) (*SearchAttribute, error) {
	key := deref(sa.Key)
	if key == "" {
		return nil, Errorf(CodeInvalidArgument, "a search attribute needs a non-empty key")
	}
	if err := CheckName("search attribute key", key); err != nil {
		return nil, err
	}
	if isSystemSearchAttribute(key) {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s is maintained by the server", key)
	}
	vt := search.ValueType(deref(sa.ValueType))
	if vt == "" {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s has no valueType", key)
	}
	if !vt.Valid() {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s has unsupported valueType %q", key, vt)
	}
	if declared, ok := e.cfg.SearchAttributeTypes[key]; len(e.cfg.SearchAttributeTypes) > 0 {
		if !ok {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s is not declared on this server", key)
		}
		if declared != vt && !(keywordFamily(declared) && keywordFamily(vt)) {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s is declared %s, got %s", key, declared, vt)
		}
	}
	a := &SearchAttribute{Key: key, ValueType: vt, Raw: encode(sa)}
	if err := checkNoNUL("search attribute "+key, deref(sa.StringValue)); err != nil {
		return nil, err
	}
	for _, s := range slice(sa.StringArrayValue) {
		if err := checkNoNUL("search attribute "+key, s); err != nil {
			return nil, err
		}
	}
	switch vt {
	case search.Keyword:
		a.String = ptr(deref(sa.StringValue))
	case search.Text:
		a.String = ptr(deref(sa.StringValue))
		if n := len(search.Words(*a.String)); n > MaxTextWords {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s: a TEXT value may have at most %d distinct words, this one has %d", key, MaxTextWords, n)
		}
	case search.Datetime:
		t, err := parseDatetime(deref(sa.StringValue), now)
		if err != nil {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s: %v", key, err)
		}
		// Kept to the nanosecond, as unix nanoseconds in 64 bits.
		if t.Before(minDatetime) || t.After(maxDatetime) {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s: DATETIME %s is outside %s to %s",
				key, t.Format(time.RFC3339Nano), minDatetime.Format(time.RFC3339Nano), maxDatetime.Format(time.RFC3339Nano))
		}
		a.Time = &t
	case search.Int:
		a.Int = ptr(deref(sa.IntegerValue))
	case search.Double:
		a.Double = ptr(deref(sa.DoubleValue))
	case search.Bool:
		a.Bool = ptr(deref(sa.BoolValue))
	case search.KeywordArray:
		a.Strings = append([]string{}, slice(sa.StringArrayValue)...)
		if n := len(a.Strings); n > MaxKeywordArrayElements {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s: a KEYWORD_ARRAY value may have at most %d elements, this one has %d", key, MaxKeywordArrayElements, n)
		}
	}
	return a, nil
}

// tooManySearchAttributes is the error of a write that would leave a run
// with n search attribute keys, more than MaxSearchAttributesPerRun.
func tooManySearchAttributes(n int) error {
	return Errorf(CodeInvalidArgument, "a workflow may have at most %d search attribute keys; this write would give it %d", MaxSearchAttributesPerRun, n)
}

// checkSearchAttributeCount fails when writing sas would leave the run with
// more than MaxSearchAttributesPerRun search attribute keys, counting the
// keys it already has (the server's own system attributes excepted).
func checkSearchAttributeCount(ctx context.Context, tx ReadTx, runID string, sas []record.SearchAttribute) error {
	if len(sas) == 0 {
		return nil
	}
	have, err := tx.SearchAttributeGet(ctx, runID, nil)
	if err != nil {
		return err
	}
	keys := make(map[string]bool, len(have)+len(sas))
	for _, a := range have {
		if !isSystemSearchAttribute(a.Key) {
			keys[a.Key] = true
		}
	}
	for _, sa := range sas {
		keys[deref(sa.Key)] = true
	}
	if len(keys) > MaxSearchAttributesPerRun {
		return tooManySearchAttributes(len(keys))
	}
	return nil
}

// The instants a DATETIME search attribute can hold: unix nanoseconds in
// an int64.
var (
	minDatetime = time.Unix(0, math.MinInt64).UTC()
	maxDatetime = time.Unix(0, math.MaxInt64).UTC()
)

// decodeSearchAttribute reads a search attribute row as it was written.
func decodeSearchAttribute(a *SearchAttribute) (record.SearchAttribute, error) {
	var sa record.SearchAttribute
	if err := json.Unmarshal(a.Raw, &sa); err != nil {
		return sa, fmt.Errorf("decoding search attribute %s: %w", a.Key, err)
	}
	return sa, nil
}

// readSearchAttribute answers searchattributes/get: the value as written,
// with DATETIME in its canonical RFC 3339 (UTC, nanoseconds) form.
func readSearchAttribute(a *SearchAttribute) iwfapi.SearchAttribute {
	sa, _ := decodeSearchAttribute(a)
	if a.ValueType == search.Datetime && a.Time != nil {
		sa.StringValue = ptr(a.Time.UTC().Format(time.RFC3339Nano))
	}
	return searchAttributeOut(sa)
}

// parseDatetime reads a DATETIME value (search.ParseDatetime).
func parseDatetime(s string, now time.Time) (time.Time, error) { return search.ParseDatetime(s, now) }

// keywordFamily reports whether t is KEYWORD or KEYWORD_ARRAY. As in
// Temporal, the two are one family: a key declared as either accepts a
// single value and a list, and a search on it matches any element.
func keywordFamily(t search.ValueType) bool {
	return t == search.Keyword || t == search.KeywordArray
}
