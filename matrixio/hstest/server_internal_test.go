package hstest

import (
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin makes a binary directory whose dendrite is the given shell script and whose other
// tools are the real ones.
func fakeBin(t *testing.T, dendrite string) string {
	t.Helper()
	real, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"generate-config", "generate-keys", "create-account"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "dendrite"), []byte("#!/bin/sh\n"+dendrite), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLaunchFailsLoudlyWithTheLog(t *testing.T) {
	t.Parallel()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: t.TempDir(), bin: fakeBin(t, "echo 'boom: no database' >&2\nexit 3\n"), port: port}
	err = s.launch()
	if err == nil {
		t.Fatal("launch of a failing binary succeeded")
	}
	for _, want := range []string{"exited during start-up", "boom: no database"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), s.Secret) {
		t.Error("the error reveals the shared secret")
	}
}

func TestLaunchDoesNotMistakeAnotherServerForItsOwn(t *testing.T) {
	t.Parallel()
	// Something else answers /versions with 200 on the port; our server cannot bind it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	other := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"versions":["v1.2"]}`))
	})}
	go func() { _ = other.Serve(l) }()
	t.Cleanup(func() { _ = other.Close() })

	bin, err := binaries()
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Dir: t.TempDir(), bin: bin, port: l.Addr().(*net.TCPAddr).Port}
	err = s.launch()
	if err == nil {
		_ = s.Stop()
		t.Fatal("launch reported ready although another server holds the port")
	}
	if !errors.Is(err, errPortInUse) {
		t.Fatalf("launch = %v, want errPortInUse", err)
	}
}

// The registration files go into app_service_api.config_files, whatever
// scripts/dendrite.sh prepare wrote around it.
func TestConfigureAppServices(t *testing.T) {
	t.Parallel()
	const before = "version: 2\napp_service_api:\n  disable_tls_validation: true\n  config_files: []\nclient_api:\n  config_files: []\n"
	s := &Server{Dir: t.TempDir()}
	path := filepath.Join(s.Dir, "dendrite.yaml")
	if err := os.WriteFile(path, []byte(before), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.configureAppServices(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != before {
		t.Errorf("without registrations dendrite.yaml changed:\n%s", got)
	}
	s.appServices = []string{"/data/a.yaml", "/data/b c.yaml"}
	if err := s.configureAppServices(); err != nil {
		t.Fatal(err)
	}
	want := "version: 2\napp_service_api:\n  disable_tls_validation: true\n  config_files:\n  - \"/data/a.yaml\"\n  - \"/data/b c.yaml\"\nclient_api:\n  config_files: []\n"
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("dendrite.yaml =\n%s\nwant\n%s", got, want)
	}
	// A configuration without the empty list is an error, not silently
	// a server without the application service.
	if err := s.configureAppServices(); err == nil || !strings.Contains(err.Error(), "app_service_api.config_files") {
		t.Errorf("second edit: error = %v", err)
	}
}
