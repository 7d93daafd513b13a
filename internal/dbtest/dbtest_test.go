package dbtest

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A database opened again by its key after a Close holds what was written
// before; another key is another, empty database.
func TestOpenAgainKeepsData(t *testing.T) {
	ForDialects(t, func(t *testing.T, d Dialect) {
		ctx := t.Context()
		key := filepath.Join(t.TempDir(), "kept.db")
		db := d.Open(t, key)
		if _, err := db.Exec(ctx, `CREATE TABLE kept (v INTEGER)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO kept (v) VALUES (7)`); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		var v int
		if err := d.Open(t, key).QueryRow(ctx, `SELECT v FROM kept`).Scan(&v); err != nil || v != 7 {
			t.Fatalf("after reopening: v = %d, %v; want 7", v, err)
		}
		if ok, err := d.Fresh(t).TableExists(ctx, "kept"); err != nil || ok {
			t.Fatalf("a fresh database has the table: %v, %v", ok, err)
		}
	})
}

func TestRace(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name     string
		n        int
		f        func(i int) (bool, error)
		wantWins int
		wantErrs int
	}{
		{"one winner", 8, func(i int) (bool, error) { return i == 3, nil }, 1, 0},
		{"every call wins", 4, func(int) (bool, error) { return true, nil }, 4, 0},
		{"errors are collected", 5, func(i int) (bool, error) {
			if i%2 == 0 {
				return false, boom
			}
			return false, nil
		}, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wins, errs := Race(tt.n, tt.f)
			if wins != tt.wantWins || len(errs) != tt.wantErrs {
				t.Fatalf("Race = %d wins, %v; want %d wins, %d errors", wins, errs, tt.wantWins, tt.wantErrs)
			}
			for _, err := range errs {
				if !errors.Is(err, boom) {
					t.Errorf("error %v, want boom", err)
				}
			}
		})
	}
}
