package search

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// ValueType is the type of a search attribute; the values are iWF's
// SearchAttributeValueType.
type ValueType string

// The search attribute value types.
const (
	Keyword      ValueType = "KEYWORD"
	Text         ValueType = "TEXT"
	Datetime     ValueType = "DATETIME"
	Int          ValueType = "INT"
	Double       ValueType = "DOUBLE"
	Bool         ValueType = "BOOL"
	KeywordArray ValueType = "KEYWORD_ARRAY"
)

// ValueTypes lists every value type.
var ValueTypes = []ValueType{Keyword, Text, Datetime, Int, Double, Bool, KeywordArray}

// Valid reports whether t is one of the value types.
func (t ValueType) Valid() bool {
	switch t {
	case Keyword, Text, Datetime, Int, Double, Bool, KeywordArray:
		return true
	}
	return false
}

var relativeDatetime = regexp.MustCompile(`^(\d+)(s|m|h|d|w|M|y|second|minute|hour|day|week|month|year)$`)

var relativeUnits = map[string]time.Duration{
	"s": time.Second, "second": time.Second, "m": time.Minute, "minute": time.Minute,
	"h": time.Hour, "hour": time.Hour, "d": 24 * time.Hour, "day": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "M": 30 * 24 * time.Hour,
	"month": 30 * 24 * time.Hour, "y": 365 * 24 * time.Hour, "year": 365 * 24 * time.Hour,
}

// ParseDatetime reads a DATETIME value as iWF accepts it: RFC 3339 with an
// offset, Unix nanoseconds as a decimal string, or "now minus N units" such
// as 15m (relative to now). "" is the Unix epoch.
func ParseDatetime(s string, now time.Time) (time.Time, error) {
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
		t := now.Add(-time.Duration(n) * relativeUnits[m[2]])
		if t.Before(time.Unix(0, 0)) {
			t = time.Unix(0, 0)
		}
		return t.UTC(), nil
	}
	return time.Time{}, fmt.Errorf("cannot parse DATETIME %q (want RFC 3339, Unix nanoseconds or a relative time like 15m)", s)
}
