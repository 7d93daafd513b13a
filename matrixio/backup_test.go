package matrixio

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRecoveryKeyFormat(t *testing.T) {
	key, err := NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  string
		want bool
	}{
		{"new", key, true},
		{"without spaces", strings.ReplaceAll(key, " ", ""), true},
		{"empty", "", false},
		{"truncated", key[:len(key)-2], false},
		{"parity broken", key[:len(key)-1] + string(rune(key[len(key)-1])^1), false},
		{"not base58", strings.Repeat("0", 48), false},
	}
	for _, tt := range tests {
		if got := ValidRecoveryKey(tt.key); got != tt.want {
			t.Errorf("%s: ValidRecoveryKey = %v, want %v", tt.name, got, tt.want)
		}
	}
	if key == other {
		t.Error("NewRecoveryKey returned the same key twice")
	}
	cfg := Config{HomeserverURL: "http://localhost", ServerName: "localhost"}
	cfg.Encryption.RecoveryKey = "EsTc not a key"
	if _, err := cfg.withDefaults(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "recovery key") || strings.Contains(err.Error(), "EsTc") {
		t.Errorf("withDefaults with a malformed recovery key = %v, want ErrInvalidConfig without the key", err)
	}
}

func TestUndecryptableCountsTheLastHour(t *testing.T) {
	m := &Manager{shared: &cryptoShared{}}
	now := time.Now()
	m.noteUndecryptable(now.Add(-2 * time.Hour))
	m.noteUndecryptable(now.Add(-30 * time.Minute))
	m.noteUndecryptable(now)
	if n := m.Undecryptable(now.Add(-time.Hour)); n != 2 {
		t.Errorf("Undecryptable(last hour) = %d, want 2", n)
	}
	if n := len(m.shared.failed); n != 2 {
		t.Errorf("kept %d failures, want 2 (older than an hour dropped)", n)
	}
}
