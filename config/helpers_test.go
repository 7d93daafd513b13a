package config_test

import (
	"errors"
	"testing"

	"github.com/hookroom/hookroom/config"
)

// minimal is the smallest valid configuration; tests append to it.
const minimal = "matrix:\n  homeserver: http://localhost:8008\n"

// fakeEnv returns an option that reads ${VAR} values from m only.
func fakeEnv(m map[string]string) config.Option {
	return config.WithLookupEnv(func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	})
}

func mustParse(t *testing.T, src string, env map[string]string) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(src), "config.yaml", fakeEnv(env))
	if err != nil {
		t.Fatalf("Parse failed:\n%v\n--- input ---\n%s", err, src)
	}
	return c
}

// parseErrors parses src, which must fail, and returns the problems as strings.
func parseErrors(t *testing.T, src string, env map[string]string) []string {
	t.Helper()
	_, err := config.Parse([]byte(src), "config.yaml", fakeEnv(env))
	if err == nil {
		t.Fatalf("Parse succeeded, want an error\n--- input ---\n%s", src)
	}
	var list config.ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error is %T, want config.ErrorList: %v", err, err)
	}
	out := make([]string, len(list))
	for i, e := range list {
		out[i] = e.Error()
	}
	return out
}

func ptr[T any](v T) *T { return &v }
