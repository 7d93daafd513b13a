package packaging_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"gopkg.in/yaml.v3"
)

// root is the repository's top directory, relative to this package.
const root = ".."

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// instruction is one Dockerfile instruction: its keyword (upper case) and its arguments with
// line continuations joined.
type instruction struct {
	stage   int // the index of the FROM that started the stage
	keyword string
	args    string
}

// parseDockerfile splits a Dockerfile into instructions: comments and blank lines dropped,
// "\"-continued lines joined (comment lines inside a continuation skipped, as docker does).
func parseDockerfile(text string) []instruction {
	var out []instruction
	stage := -1
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		keyword, args, _ := strings.Cut(line, " ")
		keyword = strings.ToUpper(keyword)
		if keyword == "FROM" {
			stage++
		}
		out = append(out, instruction{stage, keyword, strings.TrimSpace(args)})
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue
		}
		if rest, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(trimmed)
		flush()
	}
	flush()
	return out
}

// buildinfoVars are the package-level variables of internal/buildinfo that -X can set.
func buildinfoVars(t *testing.T) map[string]bool {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, "internal/buildinfo"), func(fi os.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, f := range pkgs["buildinfo"].Files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "string" {
					continue
				}
				for _, n := range vs.Names {
					vars[n.Name] = true
				}
			}
		}
	}
	return vars
}

var stampRE = regexp.MustCompile(`-X (\S+)\.(\w+)=([^\s"]*)`)

// checkStamps checks that text stamps Version, Revision and Date into internal/buildinfo, and
// that every -X names a string variable that exists there (a typo or a rename would be ignored
// by the linker, and the build would silently say "dev").
func checkStamps(t *testing.T, what, text string, want map[string]string) {
	t.Helper()
	vars := buildinfoVars(t)
	got := map[string]string{}
	for _, m := range stampRE.FindAllStringSubmatch(text, -1) {
		if m[1] != "github.com/hookroom/hookroom/internal/buildinfo" {
			t.Errorf("%s: -X %s.%s stamps another package than internal/buildinfo", what, m[1], m[2])
			continue
		}
		if !vars[m[2]] {
			t.Errorf("%s: -X …buildinfo.%s: internal/buildinfo has no string variable %s", what, m[2], m[2])
		}
		got[m[2]] = m[3]
	}
	for name, value := range want {
		if got[name] != value {
			t.Errorf("%s: -X …buildinfo.%s=%q, want %q", what, name, got[name], value)
		}
	}
}

func TestDockerfile(t *testing.T) {
	text := readFile(t, "Dockerfile")
	ins := parseDockerfile(text)
	last := ins[len(ins)-1].stage
	final := func(keyword string) []string {
		var args []string
		for _, in := range ins {
			if in.stage == last && in.keyword == keyword {
				args = append(args, in.args)
			}
		}
		return args
	}
	all := func(keyword string) string {
		var args []string
		for _, in := range ins {
			if in.keyword == keyword {
				args = append(args, in.args)
			}
		}
		return strings.Join(args, "\n")
	}

	if from := final("FROM"); len(from) != 1 || !strings.HasPrefix(from[0], "debian:") {
		t.Errorf("the image's base is %q, want Debian (python3 and a shell for the healthcheck)", from)
	}
	if run := strings.Join(final("RUN"), "\n"); !regexp.MustCompile(`apt-get install [^&]*\bpython3\b`).MatchString(run) ||
		!strings.Contains(run, "ca-certificates") || !strings.Contains(run, "tzdata") {
		t.Errorf("the image's RUN does not install python3, ca-certificates and tzdata:\n%s", run)
	}
	user := final("USER")
	if len(user) != 1 {
		t.Fatalf("the image sets USER %d times, want once", len(user))
	}
	if u, _, _ := strings.Cut(user[0], ":"); u == "" || u == "0" || u == "root" {
		t.Errorf("the image runs as %q, want a non-root user", user[0])
	}
	if !strings.Contains(strings.Join(final("RUN"), "\n"), "--uid "+strings.Split(user[0], ":")[0]) {
		t.Errorf("USER %s is not the user the image creates (useradd --uid)", user[0])
	}
	if v := final("VOLUME"); len(v) != 1 || !strings.Contains(v[0], `"/var/lib/hookroom"`) {
		t.Errorf("VOLUME = %q, want /var/lib/hookroom", v)
	}
	hc := final("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], "CMD") || !strings.Contains(hc[0], "python3") {
		t.Fatalf("HEALTHCHECK = %q, want one that runs python3", hc)
	}
	if env := strings.Join(final("ENV"), "\n"); !strings.Contains(env, "HOOKROOM_HEALTHCHECK_URL=http://127.0.0.1:8080/healthz") {
		t.Errorf("ENV does not point HOOKROOM_HEALTHCHECK_URL at /healthz:\n%s", env)
	}
	if ep := final("ENTRYPOINT"); len(ep) != 1 || ep[0] != `["/usr/bin/hookroom"]` {
		t.Errorf("ENTRYPOINT = %q", ep)
	}
	copies := strings.Join(final("COPY"), "\n")
	if !strings.Contains(copies, "plugins/sdk/python/hookroom_plugin.py /usr/lib/python3/dist-packages/hookroom_plugin.py") {
		t.Errorf("the Python SDK is not copied where python3 finds it:\n%s", copies)
	}

	build := all("RUN")
	for _, want := range []string{"go build -tags goolm", "-trimpath", "-buildvcs=false", "./cmd/hookroom"} {
		if !strings.Contains(build, want) {
			t.Errorf("the build stage's go build lacks %q", want)
		}
	}
	if !strings.Contains(all("ENV"), "CGO_ENABLED=0") {
		t.Error("the build stage does not set CGO_ENABLED=0 (the binary must be static)")
	}
	args := all("ARG")
	for _, a := range []string{`VERSION=""`, `REVISION=""`, `DATE=""`} {
		if !strings.Contains(args, a) {
			t.Errorf("no ARG %s", a)
		}
	}
	checkStamps(t, "Dockerfile", build, map[string]string{"Version": "${VERSION}", "Revision": "${REVISION}", "Date": "${DATE}"})

	// Every file the image copies from the build context exists.
	for _, c := range final("COPY") {
		fields := strings.Fields(c)
		src := fields[len(fields)-2]
		if rel, ok := strings.CutPrefix(src, "/src/"); ok {
			if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
				t.Errorf("COPY %s: %v", src, err)
			}
		}
	}
}

// The healthcheck's command really tells a healthy server from an unhealthy one.
func TestDockerfileHealthcheckCommand(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on PATH to run the image's healthcheck command with")
	}
	var hc string
	for _, in := range parseDockerfile(readFile(t, "Dockerfile")) {
		if in.keyword == "HEALTHCHECK" {
			hc = in.args
		}
	}
	_, exe, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("HEALTHCHECK %q has no CMD", hc)
	}
	var argv []string
	if err := yaml.Unmarshal([]byte(exe), &argv); err != nil || len(argv) < 2 || argv[0] != "python3" {
		t.Fatalf("HEALTHCHECK CMD %s: want an exec-form python3 command (%v)", exe, err)
	}
	var status atomic.Int32 // written by the test, read by the server's handler
	status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	check := func(url string) error {
		cmd := exec.Command(python, argv[1:]...)
		cmd.Env = append(os.Environ(), "HOOKROOM_HEALTHCHECK_URL="+url)
		return cmd.Run()
	}
	if err := check(srv.URL + "/healthz"); err != nil {
		t.Errorf("healthy server: the healthcheck failed: %v", err)
	}
	status.Store(http.StatusServiceUnavailable)
	if err := check(srv.URL + "/healthz"); err == nil {
		t.Error("server answering 503: the healthcheck passed")
	}
	srv.Close()
	if err := check(srv.URL + "/healthz"); err == nil {
		t.Error("no server: the healthcheck passed")
	}
}

func TestCompose(t *testing.T) {
	text := readFile(t, "compose.yaml")
	var c struct {
		Services map[string]struct {
			Image string
			Build struct {
				Context string
				Args    map[string]string
			}
			DependsOn map[string]struct {
				Condition string
			} `yaml:"depends_on"`
			Environment map[string]string
			Volumes     []string
			Ports       []string
			Healthcheck struct {
				Test []string
			}
		}
		Volumes map[string]any
	}
	if err := yaml.Unmarshal([]byte(text), &c); err != nil {
		t.Fatal(err)
	}
	h, ok := c.Services["hookroom"]
	if !ok {
		t.Fatal("no hookroom service")
	}
	pg, ok := c.Services["postgres"]
	if !ok {
		t.Fatal("no postgres service")
	}
	if !regexp.MustCompile(`^postgres:\d+\.\d+`).MatchString(pg.Image) {
		t.Errorf("postgres image %q is not pinned to a release (postgres:MAJOR.MINOR…)", pg.Image)
	}
	if len(pg.Healthcheck.Test) == 0 || !slices.Contains(pg.Healthcheck.Test, "pg_isready") {
		t.Errorf("postgres healthcheck %q does not run pg_isready", pg.Healthcheck.Test)
	}
	if pg.Environment["POSTGRES_USER"] != "hookroom" || pg.Environment["POSTGRES_DB"] != "hookroom" ||
		!strings.Contains(pg.Environment["POSTGRES_PASSWORD"], "${POSTGRES_PASSWORD") {
		t.Errorf("postgres environment %v: want user and database hookroom, the password from POSTGRES_PASSWORD", pg.Environment)
	}
	if h.DependsOn["postgres"].Condition != "service_healthy" {
		t.Errorf("hookroom depends_on postgres %q, want condition service_healthy", h.DependsOn["postgres"].Condition)
	}
	if !strings.Contains(h.Environment["POSTGRES_PASSWORD"], "${POSTGRES_PASSWORD") {
		t.Errorf("hookroom does not get POSTGRES_PASSWORD, which its config's database uri names")
	}
	if h.Build.Context != "." {
		t.Errorf("hookroom build context %q, want the repository", h.Build.Context)
	}
	for _, a := range []string{"VERSION", "REVISION", "DATE"} {
		if _, ok := h.Build.Args[a]; !ok {
			t.Errorf("hookroom build args lack %s (stamped into buildinfo by the Dockerfile)", a)
		}
	}
	mounts := func(vols []string) map[string]string {
		m := map[string]string{}
		for _, v := range vols {
			parts := strings.Split(v, ":")
			if len(parts) >= 2 {
				m[parts[1]] = parts[0]
			}
		}
		return m
	}
	hm := mounts(h.Volumes)
	if hm["/var/lib/hookroom"] == "" || hm["/etc/hookroom"] == "" {
		t.Errorf("hookroom volumes %q: want /var/lib/hookroom and /etc/hookroom", h.Volumes)
	}
	if mounts(pg.Volumes)["/var/lib/postgresql/data"] == "" {
		t.Errorf("postgres volumes %q: want /var/lib/postgresql/data", pg.Volumes)
	}
	for _, svc := range []map[string]string{hm, mounts(pg.Volumes)} {
		for _, src := range svc {
			if !strings.HasPrefix(src, ".") && !strings.HasPrefix(src, "/") {
				if _, ok := c.Volumes[src]; !ok {
					t.Errorf("named volume %q is not declared under volumes:", src)
				}
			}
		}
	}
	for _, p := range h.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("hookroom publishes %q on every interface; its listener is plain HTTP", p)
		}
	}
	// The config the comments tell operators to write points at this postgres service with
	// this user and database.
	if !strings.Contains(text, "uri: postgres://hookroom:${POSTGRES_PASSWORD}@postgres:5432/hookroom?sslmode=disable") {
		t.Error("compose.yaml's instructions do not show database.uri pointing at the postgres service")
	}
	if !regexp.MustCompile(`(?m)^  # synapse:$`).MatchString(text) {
		t.Error("no commented-out homeserver service (# synapse:)")
	}
	if len(c.Services) != 2 {
		t.Errorf("services %d, want hookroom and postgres only (the homeserver stays commented out)", len(c.Services))
	}
}

func TestNfpmConfig(t *testing.T) {
	var cfg struct {
		Name     string
		Version  string
		Arch     string
		Contents []struct {
			Src, Dst, Type string
			FileInfo       struct {
				Mode int
			} `yaml:"file_info"`
		}
		Scripts map[string]string
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "packaging/nfpm.yaml")), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Name != "hookroom" || cfg.Version != "${HOOKROOM_VERSION}" || cfg.Arch != "${HOOKROOM_ARCH}" {
		t.Errorf("name %q version %q arch %q", cfg.Name, cfg.Version, cfg.Arch)
	}
	want := map[string]string{ // dst → type
		"/usr/bin/hookroom":                        "",
		"/usr/lib/systemd/system/hookroom.service": "",
		"/etc/hookroom/config.example.yaml":        "config",
		"/usr/share/doc/hookroom/copyright":        "",
	}
	for _, c := range cfg.Contents {
		typ, ok := want[c.Dst]
		if !ok {
			t.Errorf("unexpected content %s", c.Dst)
			continue
		}
		if c.Type != typ {
			t.Errorf("%s: type %q, want %q", c.Dst, c.Type, typ)
		}
		if strings.HasPrefix(c.Dst, "/etc/") && c.Type != "config" {
			t.Errorf("%s is in /etc but not a conffile: an upgrade would overwrite an operator's edits", c.Dst)
		}
		delete(want, c.Dst)
	}
	for dst := range want {
		t.Errorf("the package lacks %s", dst)
	}
	for _, name := range []string{"postinstall", "preremove", "postremove"} {
		src := cfg.Scripts[name]
		if src == "" {
			t.Errorf("no %s script", name)
			continue
		}
		// release.sh copies packaging/deb/<name> into the staging directory nfpm runs in.
		path := filepath.Join(root, "packaging/deb", filepath.Base(src))
		fi, err := os.Stat(path)
		if err != nil {
			t.Error(err)
			continue
		}
		if fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", path)
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", path, err, out)
		}
		if !strings.Contains(readFile(t, "scripts/release.sh"), `"$SRC/packaging/deb/`+filepath.Base(src)+`"`) {
			t.Errorf("scripts/release.sh does not stage packaging/deb/%s", filepath.Base(src))
		}
	}
	script := readFile(t, "scripts/release.sh")
	pkg := regexp.MustCompile(`(?m)^pkg=(\S+)$`).FindStringSubmatch(script)
	if pkg == nil {
		t.Fatal("scripts/release.sh: no pkg=… line naming the buildinfo package")
	}
	checkStamps(t, "scripts/release.sh", strings.ReplaceAll(script, "$pkg", strings.ReplaceAll(pkg[1], "$MODULE", "github.com/hookroom/hookroom")),
		map[string]string{"Version": "$VERSION", "Revision": "$REVISION", "Date": "$DATE"})
}
