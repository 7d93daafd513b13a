package bot

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/pgtest"
)

// TestOpenDatabaseIsExclusive opens one database twice, as two hookroom processes would: the
// second refuses with ErrDatabaseInUse and names the database (never its password); once the
// first is closed, the database opens again.
func TestOpenDatabaseIsExclusive(t *testing.T) {
	pg, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	// A password the server ignores (trust authentication), to prove it is never shown.
	pg.User = url.UserPassword(pg.User.Username(), "s3cret-pw")
	for _, tt := range []struct {
		name string
		cfg  *config.Config
		want string // in the error
	}{
		{"sqlite", &config.Config{Database: config.Database{URI: config.Secret(filepath.Join(t.TempDir(), "hookroom.db"))}}, "hookroom.db"},
		{"postgres", &config.Config{Database: config.Database{Type: config.DatabasePostgres, URI: config.Secret(pg.String())}}, pg.Host + pg.Path},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			first, err := OpenDatabase(ctx, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			second, err := OpenDatabase(ctx, tt.cfg)
			if err == nil {
				_ = second.Close()
				t.Fatal("a second OpenDatabase on one database succeeded")
			}
			if !errors.Is(err, ErrDatabaseInUse) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "another hookroom is using it") {
				t.Errorf("second open: %v; want ErrDatabaseInUse naming %s", err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret-pw") {
				t.Errorf("the error shows the password: %v", err)
			}
			// Inspecting (hookroom check, hooks) takes no lock and works
			// next to the running server.
			inspect, err := openDatabase(ctx, tt.cfg, false)
			if err != nil {
				t.Fatalf("opening for inspection next to a running server: %v", err)
			}
			_ = inspect.Close()
			// The first still works, and Close may be called twice.
			if _, err := first.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			_ = first.Close()
			third, err := OpenDatabase(ctx, tt.cfg)
			if err != nil {
				t.Fatalf("open after the first closed: %v", err)
			}
			_ = third.Close()
		})
	}
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://hookroom:pw@db.example:5432/hookroom?sslmode=disable&password=x": "postgres://hookroom@db.example:5432/hookroom",
		"postgres://db.example/hookroom":                                             "postgres://db.example/hookroom",
		"host=db user=hookroom password='a b' dbname=h":                              "host=db user=hookroom password=REDACTED dbname=h",
		"host=db password=pw dbname=h":                                               "host=db password=REDACTED dbname=h",
	} {
		if got := redactURI(in); got != want {
			t.Errorf("redactURI(%q) = %q, want %q", in, got, want)
		}
	}
}
