package rowfmt

import (
	"errors"
	"testing"
	"time"

	"github.com/iwf-server/iwf-server/engine"
)

func TestTimes(t *testing.T) {
	if ToMs(time.Time{}) != 0 || !FromMs(0).IsZero() {
		t.Fatal("the zero time is not 0")
	}
	at := time.Date(2026, 11, 25, 1, 2, 3, 456_000_000, time.FixedZone("x", 3600))
	if got := FromMs(ToMs(at)); !got.Equal(at) || got.Location() != time.UTC {
		t.Fatalf("round trip: %v", got)
	}
}

func TestSortTasks(t *testing.T) {
	at := time.Unix(100, 0)
	tasks := []*engine.Task{{ID: 3, DueAt: at}, {ID: 1, DueAt: at.Add(time.Second)}, {ID: 2, DueAt: at}}
	SortTasks(tasks)
	if tasks[0].ID != 2 || tasks[1].ID != 3 || tasks[2].ID != 1 {
		t.Fatalf("order %d %d %d", tasks[0].ID, tasks[1].ID, tasks[2].ID)
	}
}

func TestErrors(t *testing.T) {
	noRows := errors.New("no rows")
	if err := NotFound(noRows, noRows); err != engine.ErrNotFound {
		t.Fatalf("NotFound: %v", err)
	}
	if err := Wrap("s", "Op", engine.ErrNotFound); err != engine.ErrNotFound {
		t.Fatalf("Wrap kept ErrNotFound as %v", err)
	}
	boom := errors.New("boom")
	if err := Wrap("s", "Op", boom); !errors.Is(err, boom) || err.Error() != "s: Op: boom" {
		t.Fatalf("Wrap: %v", err)
	}
}
