package migration_test

import (
	"testing"
	"testing/fstest"

	"github.com/iwf-server/iwf-server/internal/store/migration"
)

func TestLoadOrdersByVersion(t *testing.T) {
	fsys := fstest.MapFS{
		"migrations/0010_later.up.sql": {Data: []byte("B")},
		"migrations/0002_first.up.sql": {Data: []byte("A")},
		"migrations/README":            {Data: []byte("ignored")},
	}
	ms, err := migration.Load(fsys)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].Version != 2 || ms[0].Name != "first" || ms[0].SQL != "A" || ms[1].Version != 10 {
		t.Fatalf("loaded %+v", ms)
	}
}

func TestLoadRejectsBadNamesAndDuplicates(t *testing.T) {
	for name, fsys := range map[string]fstest.MapFS{
		"no name":   {"migrations/0001.up.sql": {}},
		"no number": {"migrations/init.up.sql": {}},
		"duplicate": {"migrations/0001_a.up.sql": {}, "migrations/0001_b.up.sql": {}},
	} {
		if _, err := migration.Load(fsys); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
}
