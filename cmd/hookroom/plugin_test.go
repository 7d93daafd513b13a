package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/internal/buildinfo"
	"github.com/hookroom/hookroom/plugins/installer"
)

// pluginFiles are the files of a process plugin that runs: a manifest, a
// Python program with one hook, and the Python SDK next to it.
func pluginFiles(t *testing.T, name, version string) map[string]string {
	t.Helper()
	sdk, err := os.ReadFile("../../plugins/sdk/python/hookroom_plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"hookroom-plugin.json": fmt.Sprintf(`{"name": %q, "version": %q, "api_version": 1, "command": ["python3", "plugin.py"]}`+"\n", name, version),
		"plugin.py": fmt.Sprintf(`from hookroom_plugin import hook, run


@hook("message:received")
async def received(ctx):
    pass


if __name__ == "__main__":
    run(name=%q, version=%q)
`, name, version),
		"hookroom_plugin.py": string(sdk),
	}
}

// writeTree writes files (slash paths → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
}

// gatePlugin is a process plugin whose plugin:before_install hook declines
// plugins named "evil" and versions "6.6.6", with a reason.
const gatePlugin = `from hookroom_plugin import hook, run


@hook("plugin:before_install", failure_policy="closed")
async def install_policy(ctx):
    if ctx.name == "evil":
        ctx.decline("plugins named evil are not welcome here")
    elif ctx.version == "6.6.6":
        ctx.decline(f"version {ctx.version} of {ctx.name} is cursed")


if __name__ == "__main__":
    run(name="gate", version="1.0.0")
`

// pluginEnv is a configuration directory for the plugin commands: its
// config.yaml (rewritten by setPlugins) and the plugin directory
// (<dir>/plugins, the default).
type pluginEnv struct {
	t       *testing.T
	dir     string
	cfgPath string
	plugins string
}

func newPluginEnv(t *testing.T) *pluginEnv {
	e := &pluginEnv{t: t, dir: t.TempDir()}
	e.cfgPath = filepath.Join(e.dir, "config.yaml")
	e.plugins = filepath.Join(e.dir, "plugins")
	e.setPlugins()
	return e
}

// setPlugins writes config.yaml with entries as its plugins list.
func (e *pluginEnv) setPlugins(entries ...string) {
	var b strings.Builder
	b.WriteString("data_dir: ./data\nlog:\n  level: warn\nmatrix:\n  homeserver: http://127.0.0.1:1\n  server_name: localhost\nmodels:\n  default: {provider: echo}\n")
	if len(entries) > 0 {
		b.WriteString("plugins:\n")
		for _, p := range entries {
			b.WriteString("  - " + p + "\n")
		}
	}
	writeFile(e.t, e.cfgPath, b.String())
}

// withGate puts the gate plugin in <dir>/gate and enables it.
func (e *pluginEnv) withGate() {
	files := pluginFiles(e.t, "gate", "1.0.0")
	files["plugin.py"] = gatePlugin
	writeTree(e.t, filepath.Join(e.dir, "gate"), files)
	e.setPlugins("./gate")
}

// plugin runs hookroom plugin args on the configuration.
func (e *pluginEnv) plugin(args ...string) (int, string, string) {
	e.t.Helper()
	return runCLI(append(append([]string{"plugin"}, args...), "--config", e.cfgPath)...)
}

// lock reads the lock file's entries.
func (e *pluginEnv) lock() []installer.Entry {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.plugins, installer.LockFile))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var l struct {
		Plugins []installer.Entry `json:"plugins"`
	}
	if err := json.Unmarshal(data, &l); err != nil {
		e.t.Fatal(err)
	}
	return l.Plugins
}

// installedVersion is the version in the installed plugin's manifest, ""
// when it is not installed.
func (e *pluginEnv) installedVersion(name string) string {
	e.t.Helper()
	data, err := os.ReadFile(filepath.Join(e.plugins, name, "hookroom-plugin.json"))
	if err != nil {
		return ""
	}
	var m struct{ Version string }
	if err := json.Unmarshal(data, &m); err != nil {
		e.t.Fatal(err)
	}
	return m.Version
}

// An install from a directory copies it into the plugin directory, records
// it in the lock file and prints the line that enables it; with that line
// in config.yaml, hookroom check loads the plugin. Installing it again is
// a no-op.
func TestPluginInstallFromDirectory(t *testing.T) {
	e := newPluginEnv(t)
	src := filepath.Join(t.TempDir(), "geo-src")
	writeTree(t, src, pluginFiles(t, "geo", "1.2.0"))

	code, stdout, stderr := e.plugin("install", src)
	if code != 0 {
		t.Fatalf("install exited %d: %s", code, stderr)
	}
	dir := filepath.Join(e.plugins, "geo")
	for _, want := range []string{
		"installed geo 1.2.0 from " + src + " into " + dir + "\n",
		"checksum sha256:",
		"To enable it, add to plugins: in " + e.cfgPath + ":\n  - ./plugins/geo\n",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("install printed no %q:\n%s", want, stdout)
		}
	}
	for name, content := range pluginFiles(t, "geo", "1.2.0") {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != content {
			t.Errorf("%s not installed as it was (%v)", name, err)
		}
	}
	lock := e.lock()
	if len(lock) != 1 || lock[0].Name != "geo" || lock[0].Version != "1.2.0" || lock[0].Source != src ||
		lock[0].SourceType != "dir" || !strings.Contains(stdout, "checksum "+lock[0].Checksum+"\n") {
		t.Errorf("lock file %+v; install printed:\n%s", lock, stdout)
	}

	// The printed line enables it.
	e.setPlugins("./plugins/geo")
	if code, stdout, stderr := runCLI("check", "--config", e.cfgPath); code != 0 || !strings.Contains(stdout, "1 plugins") {
		t.Fatalf("check with the installed plugin exited %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = e.plugin("install", src)
	if code != 0 || !strings.Contains(stdout, "geo 1.2.0 is up to date") || strings.Contains(stdout, "To enable it") {
		t.Errorf("the second install exited %d:\n%s%s", code, stdout, stderr)
	}
}

// A plugin:before_install hook of a plugin config.yaml enables refuses an
// install: exit 1, the reason printed, nothing installed; and an update:
// the installed version stays.
func TestPluginInstallRefusedByTheGate(t *testing.T) {
	e := newPluginEnv(t)
	e.withGate()
	evil := filepath.Join(t.TempDir(), "evil")
	writeTree(t, evil, pluginFiles(t, "evil", "1.0.0"))

	code, stdout, stderr := e.plugin("install", evil)
	if code != 1 {
		t.Fatalf("install of a refused plugin exited %d:\n%s%s", code, stdout, stderr)
	}
	if want := "hookroom: failed to install " + evil + ": refused by the install gate (plugin:before_install): plugins named evil are not welcome here\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if stdout != "" {
		t.Errorf("a refused install printed %q", stdout)
	}
	if _, err := os.Lstat(filepath.Join(e.plugins, "evil")); !os.IsNotExist(err) {
		t.Errorf("the refused plugin was installed (%v)", err)
	}
	if entries := e.lock(); len(entries) != 0 {
		t.Errorf("the lock file lists %+v", entries)
	}

	// Another plugin passes the gate; its update to a cursed version does
	// not.
	src := filepath.Join(t.TempDir(), "geo")
	writeTree(t, src, pluginFiles(t, "geo", "1.0.0"))
	if code, stdout, stderr := e.plugin("install", src); code != 0 || !strings.Contains(stdout, "installed geo 1.0.0") {
		t.Fatalf("install exited %d:\n%s%s", code, stdout, stderr)
	}
	writeTree(t, src, pluginFiles(t, "geo", "6.6.6"))
	code, _, stderr = e.plugin("update", "geo")
	if code != 1 || !strings.Contains(stderr, "hookroom: failed to update geo from "+src+": refused by the install gate (plugin:before_install): version 6.6.6 of geo is cursed") {
		t.Errorf("refused update exited %d: %s", code, stderr)
	}
	if v := e.installedVersion("geo"); v != "1.0.0" {
		t.Errorf("after a refused update version %q is installed, want 1.0.0", v)
	}
}

// git runs git in dir with a fixed identity.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.org", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files into the repository and commits them; it returns
// the commit hash.
func commit(t *testing.T, repo string, files map[string]string) string {
	t.Helper()
	writeTree(t, repo, files)
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "--quiet", "-m", "change")
	return git(t, repo, "rev-parse", "HEAD")
}

// Install from a local git repository, update to its next commit, an
// update that finds nothing new, and a failed update (a broken manifest)
// that leaves the installed version in place and in the lock file.
func TestPluginUpdateFromGit(t *testing.T) {
	e := newPluginEnv(t)
	e.withGate()
	repo := filepath.Join(t.TempDir(), "geo.git")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "--quiet", "--initial-branch", "main")
	first := commit(t, repo, pluginFiles(t, "geo", "1.1.0"))

	code, stdout, stderr := e.plugin("install", "git+"+repo+"#main")
	if code != 0 {
		t.Fatalf("install exited %d: %s", code, stderr)
	}
	if want := "installed geo 1.1.0 from git+" + repo + "#main (commit " + first[:12] + ") into " + filepath.Join(e.plugins, "geo"); !strings.Contains(stdout, want) {
		t.Errorf("install printed no %q:\n%s", want, stdout)
	}

	second := commit(t, repo, pluginFiles(t, "geo", "1.2.0"))
	code, stdout, stderr = e.plugin("update", "--json", "geo")
	if code != 0 {
		t.Fatalf("update exited %d: %s", code, stderr)
	}
	var outs []struct {
		installer.Entry
		Previous *installer.Entry `json:"previous"`
		Enabled  bool             `json:"enabled"`
		Config   string           `json:"config_entry"`
	}
	if err := json.Unmarshal([]byte(stdout), &outs); err != nil {
		t.Fatalf("update --json printed no JSON: %v\n%s", err, stdout)
	}
	if len(outs) != 1 || outs[0].Version != "1.2.0" || outs[0].Commit != second || outs[0].Previous == nil ||
		outs[0].Previous.Version != "1.1.0" || outs[0].Enabled || outs[0].Config != "- ./plugins/geo" {
		t.Errorf("update --json: %s", stdout)
	}
	if code, stdout, _ := e.plugin("update", "geo"); code != 0 || !strings.HasPrefix(stdout, "geo 1.2.0 is up to date") {
		t.Errorf("an update without changes exited %d:\n%s", code, stdout)
	}

	// A broken next version: the update fails, 1.2.0 stays.
	commit(t, repo, map[string]string{"hookroom-plugin.json": `{"name": "geo", "version": "1.3.0", "api_version": 1}`})
	code, stdout, stderr = e.plugin("update", "geo")
	if code != 1 || !strings.HasPrefix(stderr, "hookroom: failed to update geo from "+repo+"#main: ") || stdout != "" {
		t.Errorf("a broken update exited %d:\n%s%s", code, stdout, stderr)
	}
	if v := e.installedVersion("geo"); v != "1.2.0" {
		t.Errorf("after a failed update version %q is installed, want 1.2.0", v)
	}
	if lock := e.lock(); len(lock) != 1 || lock[0].Version != "1.2.0" || lock[0].Commit != second {
		t.Errorf("after a failed update the lock file lists %+v", lock)
	}
	if code, _, stderr := e.plugin("update", "nope", "geo"); code != 1 || !strings.Contains(stderr, "failed to update nope: not installed") {
		t.Errorf("update of an unknown plugin exited %d: %s", code, stderr)
	}
}

// remove refuses a plugin config.yaml still enables, naming the entry to
// delete, unless --force; then it removes the files and the lock entry.
func TestPluginRemove(t *testing.T) {
	e := newPluginEnv(t)
	src := filepath.Join(t.TempDir(), "geo")
	writeTree(t, src, pluginFiles(t, "geo", "1.2.0"))
	if code, _, stderr := e.plugin("install", src); code != 0 {
		t.Fatalf("install exited %d: %s", code, stderr)
	}
	e.setPlugins("./plugins/geo")
	dir := filepath.Join(e.plugins, "geo")

	code, stdout, stderr := e.plugin("remove", "geo")
	if code != 1 || stdout != "" {
		t.Errorf("remove of an enabled plugin exited %d:\n%s%s", code, stdout, stderr)
	}
	if want := "hookroom: " + e.cfgPath + " still enables plugin geo: delete its entry (config.yaml:10: - ./plugins/geo) first, or remove it anyway with --force\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("a refused remove removed the plugin: %v", err)
	}

	code, stdout, stderr = e.plugin("remove", "--force", "geo")
	if code != 0 || !strings.HasPrefix(stdout, "removed geo 1.2.0 ("+dir+")\n") || !strings.Contains(stdout, "still lists it (config.yaml:10: - ./plugins/geo)") {
		t.Errorf("remove --force exited %d:\n%s%s", code, stdout, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the plugin is still there: %v", err)
	}
	if lock := e.lock(); len(lock) != 0 {
		t.Errorf("the lock file still lists %+v", lock)
	}
	e.setPlugins()
	if code, _, stderr := e.plugin("remove", "geo"); code != 1 || !strings.Contains(stderr, "failed to remove geo: not installed") {
		t.Errorf("a second remove exited %d: %s", code, stderr)
	}
}

// tarGz writes files as a .tar.gz archive under one top-level directory.
func tarGz(t *testing.T, path, top string, files map[string]string) {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: top + "/" + name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, buf.String())
}

// list shows installed plugins with their state; --json prints the
// installer's statuses, --check fails on drift.
func TestPluginList(t *testing.T) {
	e := newPluginEnv(t)
	if code, stdout, _ := e.plugin("list"); code != 0 || stdout != "no plugins in "+e.plugins+"\n" {
		t.Errorf("list of nothing exited %d: %q", code, stdout)
	}
	if code, stdout, _ := e.plugin("list", "--json"); code != 0 || strings.TrimSpace(stdout) != "[]" {
		t.Errorf("list --json of nothing exited %d: %q", code, stdout)
	}
	archive := filepath.Join(t.TempDir(), "geo-1.2.0.tar.gz")
	tarGz(t, archive, "geo-1.2.0", pluginFiles(t, "geo", "1.2.0"))
	if code, stdout, stderr := e.plugin("install", archive, "--json"); code != 0 || !strings.Contains(stdout, `"source_type": "tarball"`) {
		t.Fatalf("install --json exited %d:\n%s%s", code, stdout, stderr)
	}
	wx := filepath.Join(t.TempDir(), "wx")
	writeTree(t, wx, pluginFiles(t, "wx", "0.1.0"))
	if code, _, stderr := e.plugin("install", wx); code != 0 {
		t.Fatalf("install exited %d: %s", code, stderr)
	}
	// A plugin put there by hand.
	writeTree(t, filepath.Join(e.plugins, "manual"), pluginFiles(t, "manual", "3.0.0"))

	code, stdout, stderr := e.plugin("list", "--check")
	if code != 0 {
		t.Errorf("list --check of unchanged plugins exited %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "INSTALLED") ||
		!strings.Contains(lines[1], "geo") || !strings.Contains(lines[1], "1.2.0") || !strings.Contains(lines[1], archive) ||
		!strings.Contains(lines[2], "manual") || !strings.Contains(lines[2], "unmanaged") ||
		!strings.Contains(lines[3], "wx") || !strings.Contains(lines[3], " ok ") {
		t.Errorf("list:\n%s", stdout)
	}

	// Drift: a changed file, a missing plugin.
	writeFile(t, filepath.Join(e.plugins, "geo", "plugin.py"), "print('changed')\n")
	if err := os.RemoveAll(filepath.Join(e.plugins, "wx")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = e.plugin("list", "--json", "--check")
	if code != 1 || !strings.Contains(stderr, "geo (modified), wx (missing)") {
		t.Errorf("list --check with drift exited %d: %s", code, stderr)
	}
	var list []installer.Status
	if err := json.Unmarshal([]byte(stdout), &list); err != nil {
		t.Fatalf("list --json printed no JSON: %v\n%s", err, stdout)
	}
	got := map[string]installer.State{}
	for _, s := range list {
		got[s.Name] = s.State
	}
	want := map[string]installer.State{"geo": installer.StateModified, "manual": installer.StateUnmanaged, "wx": installer.StateMissing}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("list --json states %v, want %v", got, want)
	}
}

// A git URL's password is never printed, whatever fails.
func TestPluginInstallHidesGitPassword(t *testing.T) {
	e := newPluginEnv(t)
	const password = "hunter2-secret%2Fpart"
	base := fmt.Sprintf("https://someone:%s@127.0.0.1:%d/geo.git", password, freePort(t))
	for _, source := range []string{base, base + "#-bad", "git+" + base + "#main"} {
		code, stdout, stderr := e.plugin("install", source)
		if code != 1 {
			t.Errorf("install %s exited %d", source, code)
		}
		for _, secret := range []string{password, "hunter2-secret/part"} {
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("install %s printed the password:\n%s%s", source, stdout, stderr)
			}
		}
		if !strings.Contains(stderr, "hookroom: failed to install ") {
			t.Errorf("install %s: %s", source, stderr)
		}
	}
	if err := filepath.WalkDir(e.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && bytes.Contains(data, []byte("hunter2")) {
			t.Errorf("%s holds the password", path)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func TestPluginUsage(t *testing.T) {
	e := newPluginEnv(t)
	for _, args := range [][]string{
		{"plugin"},
		{"plugin", "frobnicate"},
		{"plugin", "install"},
		{"plugin", "install", "a", "b"},
		{"plugin", "update"},
		{"plugin", "remove"},
		{"plugin", "list", "extra"},
		{"plugin", "list", "--bogus"},
	} {
		if code, _, stderr := runCLI(append(args, "--config", e.cfgPath)...); code != 2 || !strings.Contains(stderr, "Usage:") {
			t.Errorf("hookroom %s exited %d, want 2 with the usage:\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	if code, stdout, _ := runCLI("plugin", "help"); code != 0 || !strings.Contains(stdout, "hookroom plugin install") {
		t.Errorf("plugin help exited %d:\n%s", code, stdout)
	}
	if code, stdout, _ := runCLI("help"); code != 0 || !strings.Contains(stdout, "hookroom plugin install|update|remove|list") {
		t.Errorf("help exited %d:\n%s", code, stdout)
	}
	// A broken config.yaml names its problem.
	writeFile(t, e.cfgPath, "plugin_install:\n  max_files: -1\n")
	if code, _, stderr := e.plugin("list"); code != 1 || !strings.Contains(stderr, "plugin_install.max_files: must not be negative") {
		t.Errorf("list on a broken config exited %d: %s", code, stderr)
	}
}

// The manifest's hookroom range is checked against this build's version:
// a release outside it refuses the install, a development build installs
// with a warning.
func TestPluginInstallChecksTheHookroomRange(t *testing.T) {
	e := newPluginEnv(t)
	src := filepath.Join(t.TempDir(), "geo")
	files := pluginFiles(t, "geo", "1.2.0")
	files["hookroom-plugin.json"] = `{"name": "geo", "version": "1.2.0", "api_version": 1, "hookroom": ">=1.4, <2", "command": ["python3", "plugin.py"]}`
	writeTree(t, src, files)

	old := buildinfo.Version
	t.Cleanup(func() { buildinfo.Version = old })
	buildinfo.Version = "1.3.0"
	code, stdout, stderr := e.plugin("install", src)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "hookroom: failed to install "+src+": ") || !strings.Contains(stderr, "1.3.0") {
		t.Errorf("install into hookroom 1.3.0 of a plugin for >=1.4, <2 exited %d:\n%s%s", code, stdout, stderr)
	}
	if v := e.installedVersion("geo"); v != "" {
		t.Errorf("an incompatible plugin was installed: %s", v)
	}

	buildinfo.Version = ""
	code, stdout, stderr = e.plugin("install", src)
	if code != 0 || !strings.Contains(stdout, `warning: plugin geo declares hookroom >=1.4, <2, which cannot be checked against this build's version "dev"`) {
		t.Errorf("install into a development build exited %d:\n%s%s", code, stdout, stderr)
	}
	buildinfo.Version = "1.4.2"
	writeTree(t, src, map[string]string{"extra.txt": "new file\n"})
	code, stdout, stderr = e.plugin("update", "geo")
	if code != 0 || !strings.HasPrefix(stdout, "updated geo 1.2.0 → 1.2.0 from ") || strings.Contains(stdout, "warning:") {
		t.Errorf("update in hookroom 1.4.2 exited %d:\n%s%s", code, stdout, stderr)
	}
}
