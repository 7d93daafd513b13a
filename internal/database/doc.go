// Package database holds what hookroom's stores share about the one database
// they all live in: OpenSQLite opens a SQLite file the way every store needs
// it (PostgreSQL needs nothing special), Tables gives a package its own tables
// there, versioned in a table of their own, and Upgrade migrates them.
//
// A store declares its migrations and builds on Tables:
//
//	//go:embed upgrades/*.sql
//	var upgradeFiles embed.FS
//
//	func New(db *dbutil.Database) *Store {
//		return &Store{db: database.Tables(db, "approval", upgradeFiles)}
//	}
//
//	func (s *Store) Upgrade(ctx context.Context) error { return database.Upgrade(ctx, s.db) }
//
// The package imports nothing internal, so every store (and its tests) may use it.
package database
