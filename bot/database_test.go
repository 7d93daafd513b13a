package bot

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/pgtest"
)

// TestOpenDatabaseIsExclusive opens one database twice, as two hookroom processes would: the
// second refuses with ErrDatabaseInUse and names the database (never its password); once the
// first is closed, the database opens again.
func TestOpenDatabaseIsExclusive(t *testing.T) {
	defer func(w time.Duration) { postgresLockWait = w }(postgresLockWait)
	postgresLockWait = 300 * time.Millisecond
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

// TestPostgresLockWaitsForAStoppedSession: a hookroom started right after
// another stopped (a crash restart: the killed process's session ends a
// moment later) waits for the lock instead of refusing to start.
func TestPostgresLockWaitsForAStoppedSession(t *testing.T) {
	defer func(w time.Duration) { postgresLockWait = w }(postgresLockWait)
	postgresLockWait = 30 * time.Second
	cfg := &config.Config{Database: config.Database{Type: config.DatabasePostgres, URI: config.Secret(pgtest.URL(t))}}
	waiting := make(chan struct{})
	var once sync.Once
	log := zerolog.New(writerFunc(func(p []byte) (int, error) {
		if strings.Contains(string(p), "waiting in case it is a stopped hookroom") {
			once.Do(func() { close(waiting) })
		}
		return len(p), nil
	}))
	ctx := log.WithContext(context.Background())
	first, err := OpenDatabase(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		second, err := OpenDatabase(ctx, cfg)
		if err == nil {
			_ = second.Close()
		}
		opened <- err
	}()
	// Once the second says it waits, the first goes away.
	select {
	case err := <-opened:
		t.Fatalf("the second open returned while the first held the lock: %v", err)
	case <-waiting:
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("the second open after the first closed: %v", err)
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

type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
