package packaging_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/procgroup"
)

// The release version the test builds: a pre-release, so the Debian version's "~" is tested too.
const (
	testVersion    = "9.8.7-rc.1"
	testDebVersion = "9.8.7~rc.1"
)

// TestRelease runs scripts/release.sh for this machine's architecture and checks what it made:
// the static binary names the stamped version, commit and commit time; SHA256SUMS matches;
// the .deb has the expected metadata, files and scripts. Then, as root, it installs the .deb
// for real with dpkg -i and checks the installed system (user, directories, unit, version),
// that a reinstall keeps the operator's files, that remove and purge keep the data, and that
// a purge with HOOKROOM_PURGE_DATA=yes removes everything. About a minute on 2 cores with a
// warm Go build cache; more when the cache is cold (the release build is -trimpath, so it
// shares no compiled packages with go test).
//
// What is built is the commit (HOOKROOM_RELEASE_REF, default HEAD), not the work tree:
// commit packaging changes before running this.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a release with scripts/release.sh (go, git, nfpm) and installs its .deb with dpkg")
	}
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skipf("releases are built for linux/amd64 and linux/arm64, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	for _, tool := range []string{"bash", "git", "go", "sha256sum", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH (a Debian-like system with the Go toolchain): %v", tool, err)
		}
	}
	repo, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	ref := os.Getenv("HOOKROOM_RELEASE_REF")
	if ref == "" {
		ref = "HEAD"
	}
	revision := strings.TrimSpace(run(t, "git", "-C", repo, "rev-parse", "--verify", ref+"^{commit}"))
	epoch, err := strconv.ParseInt(strings.TrimSpace(run(t, "git", "-C", repo, "log", "-1", "--format=%ct", revision)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	date := time.Unix(epoch, 0).UTC().Format("2006-01-02T15:04:05Z")

	// The build stops (with everything it started: go build's compilers) a minute before the
	// test's deadline, so a slow build fails with its output instead of a panic that leaves
	// the compilers running; its temporary files are under a directory the test removes.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Minute))
		defer cancel()
	}
	out, tmp := t.TempDir(), t.TempDir()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(repo, "scripts/release.sh"), "v"+testVersion, out)
	cmd.Env = append(withoutEnv(os.Environ(), "SOURCE_DATE_EPOCH", "TMPDIR"),
		"HOOKROOM_RELEASE_ARCHES="+runtime.GOARCH, "HOOKROOM_RELEASE_REF="+revision, "TMPDIR="+tmp)
	procgroup.Set(cmd)
	cmd.Cancel = func() error { return procgroup.Signal(cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if ctx.Err() != nil {
		t.Fatalf("scripts/release.sh did not finish in %s (a cold Go build cache on a busy machine? go test -timeout 20m):\n%s",
			time.Since(start).Round(time.Second), stderr.String())
	}
	if err != nil {
		t.Fatalf("scripts/release.sh: %v\n%s", err, stderr.String())
	}
	t.Logf("scripts/release.sh %s (%s) took %s:\n%s", testVersion, runtime.GOARCH, time.Since(start).Round(100*time.Millisecond), stderr.String())

	bin := "hookroom-" + testVersion + "-linux-" + runtime.GOARCH
	deb := "hookroom_" + testDebVersion + "_" + runtime.GOARCH + ".deb"

	// stdout is SHA256SUMS, which covers exactly the two files, with the right sums.
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if string(stdout) != string(sums) {
		t.Errorf("release.sh printed\n%s\nbut SHA256SUMS is\n%s", stdout, sums)
	}
	listed := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(string(sums)))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not sha256sum's format", sc.Text())
		}
		listed[name] = sum
	}
	if len(listed) != 2 || listed[bin] == "" || listed[deb] == "" {
		t.Fatalf("SHA256SUMS lists %v, want %s and %s", listed, bin, deb)
	}
	for name, sum := range listed {
		if got := fileSHA256(t, filepath.Join(out, name)); got != sum {
			t.Errorf("%s: sha256 %s, SHA256SUMS says %s", name, got, sum)
		}
	}

	// The binary is static and names the release.
	binPath := filepath.Join(out, bin)
	assertStatic(t, binPath)
	wantVersion := fmt.Sprintf("hookroom %s (revision %s, %s) %s linux/%s", testVersion, revision[:12], date, runtime.Version(), runtime.GOARCH)
	if got := strings.TrimSpace(run(t, binPath, "version")); got != wantVersion {
		t.Errorf("%s version:\n got %q\nwant %q", bin, got, wantVersion)
	}

	// The package: metadata, scripts, files.
	debPath := filepath.Join(out, deb)
	for _, f := range []string{"Package: hookroom", "Version: " + testDebVersion, "Architecture: " + runtime.GOARCH} {
		if got := strings.TrimSpace(run(t, "dpkg-deb", "--field", debPath, strings.Split(f, ":")[0])); got != strings.TrimSpace(strings.SplitN(f, ":", 2)[1]) {
			t.Errorf("%s: %s, want %q", deb, got, f)
		}
	}
	control := t.TempDir()
	run(t, "dpkg-deb", "--control", debPath, control)
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		fi, err := os.Stat(filepath.Join(control, s))
		if err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s: no executable %s (%v)", deb, s, err)
		}
	}
	if conffiles := readAll(t, filepath.Join(control, "conffiles")); strings.TrimSpace(conffiles) != "/etc/hookroom/config.example.yaml" {
		t.Errorf("conffiles = %q, want only /etc/hookroom/config.example.yaml", conffiles)
	}
	contents := run(t, "dpkg-deb", "--contents", debPath)
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/hookroom",
		"-rw-r--r-- root/root .* ./usr/lib/systemd/system/hookroom.service",
		"-rw-r--r-- root/root .* ./etc/hookroom/config.example.yaml",
		"-rw-r--r-- root/root .* ./usr/share/doc/hookroom/copyright",
	} {
		if !matchLine(contents, want) {
			t.Errorf("%s has no line like %q:\n%s", deb, want, contents)
		}
	}
	tree := t.TempDir()
	run(t, "dpkg-deb", "--extract", debPath, tree)
	unit := readAll(t, filepath.Join(tree, "usr/lib/systemd/system/hookroom.service"))
	for _, want := range []string{"ExecStart=/usr/bin/hookroom run --config /etc/hookroom/config.yaml\n", "User=hookroom\n", "EnvironmentFile=-/etc/hookroom/hookroom.env\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the packaged unit lacks %q", want)
		}
	}
	if ex := readAll(t, filepath.Join(tree, "etc/hookroom/config.example.yaml")); !strings.Contains(ex, "\ndata_dir: /var/lib/hookroom\n") {
		t.Error("the packaged config.example.yaml does not set data_dir: /var/lib/hookroom")
	}
	if fileSHA256(t, filepath.Join(tree, "usr/bin/hookroom")) != listed[bin] {
		t.Error("the packaged /usr/bin/hookroom is not the released binary")
	}

	t.Run("dpkg", func(t *testing.T) { testInstall(t, debPath, wantVersion) })
}

// testInstall installs the package on this machine for real. It refuses (skips) when the
// machine has any trace of a hookroom installation, and removes every trace it made, also
// when it fails.
func testInstall(t *testing.T, debPath, wantVersion string) {
	if os.Geteuid() != 0 {
		t.Skip("installing the .deb with dpkg -i needs root")
	}
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg")
	}
	if out, err := exec.Command("dpkg-query", "--show", "--showformat=${db:Status-Status}", "hookroom").Output(); err == nil && string(out) != "not-installed" {
		t.Skipf("a hookroom package is on this machine (%s): not touching it", out)
	}
	for _, p := range []string{"/etc/hookroom", "/var/lib/hookroom", "/usr/bin/hookroom"} {
		if _, err := os.Lstat(p); err == nil {
			t.Skipf("%s exists: this machine has a hookroom installation; not touching it", p)
		}
	}
	if _, err := user.Lookup("hookroom"); err == nil {
		t.Skip("a hookroom user exists: this machine has a hookroom installation; not touching it")
	}
	if _, err := user.LookupGroup("hookroom"); err == nil {
		t.Skip("a hookroom group exists: this machine has a hookroom installation; not touching it")
	}
	t.Cleanup(func() {
		// Whatever happened: no package, files, user or group left behind.
		if out, err := exec.Command("dpkg-query", "--show", "--showformat=${db:Status-Status}", "hookroom").Output(); err == nil && string(out) != "not-installed" {
			c := exec.Command("dpkg", "--purge", "hookroom")
			c.Env = append(os.Environ(), "HOOKROOM_PURGE_DATA=yes")
			if b, err := c.CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg --purge hookroom: %v\n%s", err, b)
			}
		}
		for _, p := range []string{"/etc/hookroom", "/var/lib/hookroom"} {
			if err := os.RemoveAll(p); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
		if _, err := user.Lookup("hookroom"); err == nil {
			_ = exec.Command("userdel", "hookroom").Run()
		}
		if _, err := user.LookupGroup("hookroom"); err == nil {
			_ = exec.Command("groupdel", "hookroom").Run()
		}
	})

	install := run(t, "dpkg", "-i", debPath)
	if !strings.Contains(install, "the service is not enabled yet") {
		t.Errorf("dpkg -i printed no next steps:\n%s", install)
	}
	if got := strings.TrimSpace(run(t, "/usr/bin/hookroom", "version")); got != wantVersion {
		t.Errorf("/usr/bin/hookroom version:\n got %q\nwant %q", got, wantVersion)
	}
	u, err := user.Lookup("hookroom")
	if err != nil {
		t.Fatalf("dpkg -i created no hookroom user: %v", err)
	}
	if uid, _ := strconv.Atoi(u.Uid); uid == 0 || uid >= 1000 {
		t.Errorf("hookroom's uid %s is not a system uid", u.Uid)
	}
	if u.HomeDir != "/var/lib/hookroom" {
		t.Errorf("hookroom's home %q", u.HomeDir)
	}
	if passwd := readAll(t, "/etc/passwd"); !matchLine(passwd, "^hookroom:.*:/usr/sbin/nologin$") {
		t.Error("hookroom's shell is not /usr/sbin/nologin")
	}
	assertOwner(t, "/etc/hookroom", "root", "hookroom", 0o750|os.ModeDir)
	assertOwner(t, "/var/lib/hookroom", "hookroom", "hookroom", 0o700|os.ModeDir)
	assertOwner(t, "/usr/lib/systemd/system/hookroom.service", "root", "root", 0o644)
	assertOwner(t, "/etc/hookroom/config.example.yaml", "root", "root", 0o644)

	// The operator's files survive a reinstall (an upgrade's path through the scripts).
	const operatorConfig = "data_dir: /var/lib/hookroom # the operator's\n"
	writeFile(t, "/etc/hookroom/config.yaml", operatorConfig)
	writeFile(t, "/etc/hookroom/hookroom.env", "OPENAI_API_KEY=not-a-real-key\n")
	writeFile(t, "/var/lib/hookroom/hookroom.db", "the database")
	run(t, "dpkg", "-i", debPath)
	if got := readAll(t, "/etc/hookroom/config.yaml"); got != operatorConfig {
		t.Errorf("a reinstall changed config.yaml to %q", got)
	}

	// remove: the program goes, configuration, data and user stay.
	run(t, "dpkg", "--remove", "hookroom")
	for _, p := range []string{"/usr/bin/hookroom", "/usr/lib/systemd/system/hookroom.service"} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("after dpkg --remove, %s: %v", p, err)
		}
	}
	for _, p := range []string{"/etc/hookroom/config.yaml", "/etc/hookroom/hookroom.env", "/etc/hookroom/config.example.yaml", "/var/lib/hookroom/hookroom.db"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("after dpkg --remove: %v", err)
		}
	}

	// purge: the package's example goes; the operator's files, the data and the user stay.
	purge := run(t, "dpkg", "--purge", "hookroom")
	if !strings.Contains(purge, "kept /var/lib/hookroom") {
		t.Errorf("dpkg --purge did not say it kept the data:\n%s", purge)
	}
	if _, err := os.Stat("/etc/hookroom/config.example.yaml"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after dpkg --purge, config.example.yaml: %v", err)
	}
	for _, p := range []string{"/etc/hookroom/config.yaml", "/etc/hookroom/hookroom.env", "/var/lib/hookroom/hookroom.db"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("dpkg --purge removed the operator's data: %v", err)
		}
	}
	if _, err := user.Lookup("hookroom"); err != nil {
		t.Errorf("dpkg --purge removed the hookroom user, which still owns the data: %v", err)
	}

	// Installing over the kept data, then purging with HOOKROOM_PURGE_DATA=yes: all gone but
	// the operator's configuration.
	run(t, "dpkg", "-i", debPath)
	assertOwner(t, "/var/lib/hookroom", "hookroom", "hookroom", 0o700|os.ModeDir)
	c := exec.Command("dpkg", "--purge", "hookroom")
	c.Env = append(os.Environ(), "HOOKROOM_PURGE_DATA=yes")
	if b, err := c.CombinedOutput(); err != nil {
		t.Fatalf("HOOKROOM_PURGE_DATA=yes dpkg --purge hookroom: %v\n%s", err, b)
	}
	if st, _ := exec.Command("dpkg-query", "--show", "--showformat=${db:Status-Status}", "hookroom").Output(); len(st) > 0 && string(st) != "not-installed" {
		t.Errorf("after dpkg --purge, the package's status is %q", st)
	}
	if _, err := os.Stat("/var/lib/hookroom"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("HOOKROOM_PURGE_DATA=yes kept /var/lib/hookroom: %v", err)
	}
	if _, err := user.Lookup("hookroom"); err == nil {
		t.Error("HOOKROOM_PURGE_DATA=yes kept the hookroom user")
	}
	if _, err := user.LookupGroup("hookroom"); err == nil {
		t.Error("HOOKROOM_PURGE_DATA=yes kept the hookroom group")
	}
	if got := readAll(t, "/etc/hookroom/config.yaml"); got != operatorConfig {
		t.Errorf("purge changed the operator's config.yaml to %q", got)
	}
}

// run runs a command and returns its standard output; stderr goes into the failure message.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// withoutEnv is env without the variables names.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func readAll(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
}

// matchLine reports whether a line of text matches the regular expression re.
func matchLine(text, re string) bool {
	return regexp.MustCompile(`(?m)` + re).MatchString(text)
}

// assertStatic fails unless the ELF file at path needs no dynamic loader or shared library.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter: not a static binary", path)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s links shared libraries %v", path, libs)
	}
}

// assertOwner checks a path's owner, group and mode.
func assertOwner(t *testing.T, path, owner, group string, mode os.FileMode) {
	t.Helper()
	out := strings.Fields(run(t, "stat", "-c", "%U %G %a", path))
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if out[0] != owner || out[1] != group || fi.Mode()&(os.ModeDir|os.ModePerm) != mode {
		t.Errorf("%s is %s:%s %v, want %s:%s %v", path, out[0], out[1], fi.Mode(), owner, group, mode)
	}
}
