package born

import (
	"math"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/search"
)

// TestRead: a run and execution inserted read back as stored; a read of
// anything else, or of a run changed since, is unknown. (The stores'
// conformance suite compares Read with what each store reads.)
func TestRead(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_901_234, time.FixedZone("x", 3600))
	var b Rows
	b.Executions([]*engine.Execution{{RunID: "r", ExecutionID: "S1-1", CreatedAt: at}})
	b.Run(&engine.Run{RunID: "r", StartedAt: at})
	b.DataAttributes("r", []*engine.Attribute{{Key: "b", Value: []byte(`1`)}, {Key: "a"}})
	b.DataAttributes("other", []*engine.Attribute{{Key: "c"}})
	b.DataAttributes("r", []*engine.Attribute{{Key: "b", Value: []byte(`2`)}})

	got := b.Read("r", "S1-1")
	if got == nil || !got.Run.StartedAt.Equal(time.UnixMilli(at.UnixMilli())) || got.Run.StartedAt.Location() != time.UTC {
		t.Fatalf("Read: %+v", got)
	}
	if len(got.DataAttributes) != 2 || got.DataAttributes[0].Key != "a" || string(got.DataAttributes[1].Value) != "2" {
		t.Fatalf("data attributes: %+v", got.DataAttributes)
	}
	if b.Read("r", "S2-1") != nil || b.Read("other", "S1-1") != nil {
		t.Fatal("a read of what the transaction did not insert is known")
	}
	if !b.Wrote("other") || b.Wrote("none") {
		t.Fatal("Wrote")
	}
	b.Change("r")
	if b.Read("r", "S1-1") != nil {
		t.Fatal("a read of a run changed after its insert is known")
	}
	b.Reset()
	if b.Wrote("r") || b.Read("r", "S1-1") != nil {
		t.Fatal("Reset kept rows")
	}
}

// TestFormatDouble: a REAL column gives -0 back as 0 and NaN as no value;
// the zero Format gives back what it was given.
func TestFormatDouble(t *testing.T) {
	negZero, nan := math.Copysign(0, -1), math.NaN()
	sa := func(v float64) engine.SearchAttribute {
		return engine.SearchAttribute{Key: "d", ValueType: search.Double, Double: &v}
	}
	if d := (Format{}).readBack(sa(negZero)).Double; d == nil || !math.Signbit(*d) {
		t.Errorf("zero Format: -0 read back as %v", d)
	}
	if d := (Format{RealDoubles: true}).readBack(sa(negZero)).Double; d == nil || math.Signbit(*d) || *d != 0 {
		t.Errorf("RealDoubles: -0 read back as %v, want 0", d)
	}
	if d := (Format{RealDoubles: true}).readBack(sa(nan)).Double; d != nil {
		t.Errorf("RealDoubles: NaN read back as %v, want nil", *d)
	}
	if d := (Format{RealDoubles: true}).readBack(sa(2.5)).Double; d == nil || *d != 2.5 {
		t.Errorf("RealDoubles: 2.5 read back as %v", d)
	}
}
