package database

import (
	"path/filepath"
	"strings"
	"testing"

	"go.mau.fi/util/dbutil"
)

// Upgrade's error names the tables it failed to upgrade, after their version table.
func TestUpgradeErrorNamesTheTables(t *testing.T) {
	db, err := OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "hookroom.db"))
	if err != nil {
		t.Fatal(err)
	}
	child := db.Child("probe"+versionSuffix, dbutil.UpgradeTable{}, nil)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	err = Upgrade(t.Context(), child)
	if err == nil || !strings.HasPrefix(err.Error(), "failed to upgrade probe tables: ") {
		t.Fatalf("Upgrade on a closed database = %v; want failed to upgrade probe tables: …", err)
	}
}
