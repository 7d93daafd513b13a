package database

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"go.mau.fi/util/dbutil"
)

// versionSuffix ends the name of every package's version table.
const versionSuffix = "_version"

// Tables returns db as the package name sees it: its numbered migrations are
// the files upgrades/*.sql of upgrades (the package's //go:embed upgrades/*.sql),
// versioned in their own table name_version, so packages sharing the database
// migrate independently. A store's constructor calls it; it does not touch the
// database (Upgrade does). It panics when upgrades has no upgrades directory
// or a file there is misnamed, a programming error.
func Tables(db *dbutil.Database, name string, upgrades embed.FS) *dbutil.Database {
	table := dbutil.BuildUpgradeTable().WithFSPath(upgrades, "upgrades").Finish()
	return db.Child(name+versionSuffix, table, nil)
}

// Upgrade creates or migrates the tables of db, a database Tables returned.
// A store's Upgrade calls it once at start-up; running it again on an
// up-to-date database changes nothing. The error names the package's tables.
func Upgrade(ctx context.Context, db *dbutil.Database) error {
	if err := db.Upgrade(ctx); err != nil {
		return fmt.Errorf("failed to upgrade %s tables: %w", strings.TrimSuffix(db.VersionTable, versionSuffix), err)
	}
	return nil
}
