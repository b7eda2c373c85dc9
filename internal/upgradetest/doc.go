// Package upgradetest proves that a release reads and finishes the
// workflows stored by the release before it.
//
// testdata/v1 holds a database written by the release whose stored format
// is version 1, for each store: iwf.db (SQLite) and postgres.sql (a
// pg_dump of one schema). TestSQLiteUpgradeV1 and TestPostgresUpgradeV1
// open copies of them with the code of the checkout, read every closed run
// and drive every run in flight to completion.
//
// The data is written by TestWriteUpgradeData, from the same scenario the
// upgrade tests check (drive_test.go, scenario_test.go), which is why those
// files use only APIs that both releases have. To capture a new format
// version, run on the release that writes it:
//
//	IWF_UPGRADE_WRITE=$PWD/internal/upgradetest/testdata/vN \
//	IWF_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	go test -count=1 -run TestWriteUpgradeData ./internal/upgradetest/
//
// and add the upgrade tests for vN beside those for v1. The package has no
// non-test code.
package upgradetest
