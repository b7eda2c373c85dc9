package iwf

import (
	"fmt"
	"strconv"
	"time"

	"github.com/iwf-server/iwf-server/sdk-go/internal/wire"
)

// SearchAttributeType is the type of a search attribute.
type SearchAttributeType string

// The search attribute types and the Go types that hold their values.
const (
	SearchAttributeKeyword      SearchAttributeType = "KEYWORD"       // string, matched exactly
	SearchAttributeText         SearchAttributeType = "TEXT"          // string, matched by word
	SearchAttributeDatetime     SearchAttributeType = "DATETIME"      // time.Time
	SearchAttributeInt          SearchAttributeType = "INT"           // int64
	SearchAttributeDouble       SearchAttributeType = "DOUBLE"        // float64
	SearchAttributeBool         SearchAttributeType = "BOOL"          // bool
	SearchAttributeKeywordArray SearchAttributeType = "KEYWORD_ARRAY" // []string
)

func (t SearchAttributeType) valid() bool {
	switch t {
	case SearchAttributeKeyword, SearchAttributeText, SearchAttributeDatetime, SearchAttributeInt,
		SearchAttributeDouble, SearchAttributeBool, SearchAttributeKeywordArray:
		return true
	}
	return false
}

// SearchAttributeDef declares a search attribute a workflow uses: its key
// and its type.
type SearchAttributeDef struct {
	Key  string              // the attribute's name
	Type SearchAttributeType // its type
}

// SearchAttribute is a typed search attribute value. The field that holds
// the value depends on Type: StringValue for KEYWORD and TEXT, TimeValue
// for DATETIME, IntValue, DoubleValue, BoolValue and StringsValue for
// KEYWORD_ARRAY. Build one with KeywordAttribute, IntAttribute and so on.
type SearchAttribute struct {
	Key  string              // the attribute's name
	Type SearchAttributeType // its type, which selects the value field

	StringValue  string    // KEYWORD, TEXT; for DATETIME the string as the server gave it
	IntValue     int64     // INT
	DoubleValue  float64   // DOUBLE
	BoolValue    bool      // BOOL
	TimeValue    time.Time // DATETIME
	StringsValue []string  // KEYWORD_ARRAY
}

// KeywordAttribute returns a KEYWORD search attribute.
func KeywordAttribute(key, value string) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeKeyword, StringValue: value}
}

// TextAttribute returns a TEXT search attribute.
func TextAttribute(key, value string) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeText, StringValue: value}
}

// DatetimeAttribute returns a DATETIME search attribute.
func DatetimeAttribute(key string, value time.Time) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeDatetime, TimeValue: value}
}

// IntAttribute returns an INT search attribute.
func IntAttribute(key string, value int64) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeInt, IntValue: value}
}

// DoubleAttribute returns a DOUBLE search attribute.
func DoubleAttribute(key string, value float64) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeDouble, DoubleValue: value}
}

// BoolAttribute returns a BOOL search attribute.
func BoolAttribute(key string, value bool) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeBool, BoolValue: value}
}

// KeywordArrayAttribute returns a KEYWORD_ARRAY search attribute.
func KeywordArrayAttribute(key string, values ...string) SearchAttribute {
	return SearchAttribute{Key: key, Type: SearchAttributeKeywordArray, StringsValue: values}
}

// datetimeLayout is RFC 3339 with a numeric offset and optional fractional
// seconds: what every iWF server accepts for DATETIME.
const datetimeLayout = "2006-01-02T15:04:05.999999999-07:00"

func (a SearchAttribute) toWire() (wire.SearchAttribute, error) {
	w := wire.SearchAttribute{Key: ptr(a.Key), ValueType: ptr(wire.SearchAttributeValueType(a.Type))}
	switch a.Type {
	case SearchAttributeKeyword, SearchAttributeText:
		w.StringValue = ptr(a.StringValue)
	case SearchAttributeDatetime:
		w.StringValue = ptr(a.TimeValue.Format(datetimeLayout))
	case SearchAttributeInt:
		w.IntegerValue = ptr(a.IntValue)
	case SearchAttributeDouble:
		w.DoubleValue = ptr(a.DoubleValue)
	case SearchAttributeBool:
		w.BoolValue = ptr(a.BoolValue)
	case SearchAttributeKeywordArray:
		w.StringArrayValue = ptr(append([]string{}, a.StringsValue...))
	default:
		return w, fmt.Errorf("iwf: search attribute %q has invalid type %q", a.Key, a.Type)
	}
	return w, nil
}

func searchAttributeFromWire(w wire.SearchAttribute) SearchAttribute {
	a := SearchAttribute{Key: deref(w.Key), Type: SearchAttributeType(deref(w.ValueType))}
	a.StringValue = deref(w.StringValue)
	a.IntValue = deref(w.IntegerValue)
	a.DoubleValue = deref(w.DoubleValue)
	a.BoolValue = deref(w.BoolValue)
	a.StringsValue = slice(w.StringArrayValue)
	if a.Type == SearchAttributeDatetime {
		a.TimeValue = parseDatetime(a.StringValue)
	}
	return a
}

// parseDatetime reads a DATETIME value as servers hand it back: RFC 3339
// or Unix nanoseconds. Anything else (e.g. a relative "15m" as written)
// gives the zero time.
func parseDatetime(s string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Unix(0, n)
	}
	return time.Time{}
}
