package engine

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/api/iwfapi"
	"github.com/iwf-server/iwf-server/engine/internal/record"
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
	sa := record.SearchAttribute{Key: ptr(SystemSAWorkflowType), ValueType: ptr("KEYWORD"), StringValue: ptr(workflowType)}
	return &SearchAttribute{Key: SystemSAWorkflowType, ValueType: "KEYWORD", Raw: encode(sa), String: ptr(workflowType)}
}

func isSystemSearchAttribute(key string) bool {
	return key == SystemSAWorkflowType || key == SystemSAExecutingStateIDs || key == systemSAGlobalVersion
}

// toStoreSearchAttributes validates search attributes and adds the typed
// value the index uses. now resolves relative DATETIME values.
func (e *Engine) toStoreSearchAttributes(sas []record.SearchAttribute, now time.Time) ([]*SearchAttribute, error) {
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
	if isSystemSearchAttribute(key) {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s is maintained by the server", key)
	}
	vt := deref(sa.ValueType)
	if vt == "" {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s has no valueType", key)
	}
	if !validSearchAttributeType(vt) {
		return nil, Errorf(CodeInvalidArgument, "search attribute %s has unsupported valueType %q", key, vt)
	}
	if declared, ok := e.cfg.SearchAttributeTypes[key]; len(e.cfg.SearchAttributeTypes) > 0 {
		if !ok {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s is not declared on this server", key)
		}
		if declared != vt {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s is declared %s, got %s", key, declared, vt)
		}
	}
	a := &SearchAttribute{Key: key, ValueType: vt, Raw: encode(sa)}
	switch vt {
	case "KEYWORD", "TEXT":
		a.String = ptr(deref(sa.StringValue))
	case "DATETIME":
		t, err := parseDatetime(deref(sa.StringValue), now)
		if err != nil {
			return nil, Errorf(CodeInvalidArgument, "search attribute %s: %v", key, err)
		}
		a.Time = &t
	case "INT":
		a.Int = ptr(deref(sa.IntegerValue))
	case "DOUBLE":
		a.Double = ptr(deref(sa.DoubleValue))
	case "BOOL":
		a.Bool = ptr(deref(sa.BoolValue))
	case "KEYWORD_ARRAY":
		a.Strings = append([]string{}, slice(sa.StringArrayValue)...)
	}
	return a, nil
}

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
	if a.ValueType == "DATETIME" && a.Time != nil {
		sa.StringValue = ptr(a.Time.UTC().Format(time.RFC3339Nano))
	}
	return searchAttributeOut(sa)
}

var relativeDatetime = regexp.MustCompile(`^(\d+)(s|m|h|d|w|M|y|second|minute|hour|day|week|month|year)$`)

// parseDatetime accepts iWF's DATETIME inputs: RFC 3339 with offset, Unix
// nanoseconds as a decimal string, or "now minus N units" such as 15m.
func parseDatetime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(0, n).UTC(), nil
	}
	if m := relativeDatetime.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		if n <= 0 || n >= 1000000 {
			return time.Time{}, fmt.Errorf("relative time %q out of range", s)
		}
		unit := map[string]time.Duration{
			"s": time.Second, "second": time.Second, "m": time.Minute, "minute": time.Minute,
			"h": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour,
			"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "M": 30 * 24 * time.Hour,
			"month": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour, "year": 365 * 24 * time.Hour,
		}[m[2]]
		t := now.Add(-time.Duration(n) * unit)
		if t.Before(time.Unix(0, 0)) {
			t = time.Unix(0, 0)
		}
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("cannot parse DATETIME %q (want RFC 3339, Unix nanoseconds or a relative time like 15m)", s)
}
