// Package dbtest runs a store's tests on every database hookroom supports,
// so no store's tests carry their own copy of the setup: ForDialects runs a
// subtest per dialect, each opening fresh databases (a SQLite file under the
// test's TempDir, a new PostgreSQL database from internal/pgtest), and
// ForStores does the same with the store made and upgraded. Race runs calls
// at once, for the guarantees that exactly one of them wins.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) } // PostgreSQL needs it
//
//	func TestStore(t *testing.T) {
//		dbtest.ForStores(t, New, func(t *testing.T, db *dbutil.Database, s *Store) {
//			// s is upgraded on a fresh database of the subtest's dialect
//		})
//	}
package dbtest
