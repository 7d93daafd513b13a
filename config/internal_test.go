package config

import (
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestKeyPaths(t *testing.T) {
	tests := []struct {
		name, path, parent string
	}{
		{"top-level key", "matrix", ""},
		{"nested key", "matrix.router.username", "matrix.router"},
		{"index", "plugins[3]", "plugins"},
		{"key below index", "plugins[0].settings", "plugins[0]"},
		{"quoted key", JoinKey("authorization.room_permissions", "!a:b.org"), "authorization.room_permissions"},
		{"index below quoted key", JoinIndex(JoinKey("x", "a.b"), 2), `x["a.b"]`},
		{"key below quoted key", JoinKey(JoinKey("x", "a.b"), "c"), `x["a.b"]`},
		{"quoted key with bracket and quote", JoinKey("x", `a"]b`), "x"},
		{"top-level quoted key", JoinKey("", "a b"), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parentPath(tt.path); got != tt.parent {
				t.Errorf("parentPath(%q) = %q, want %q", tt.path, got, tt.parent)
			}
		})
	}
	if got := JoinKey("a", "!x:y"); got != `a["!x:y"]` {
		t.Errorf("joinKey quoted = %q", got)
	}
	for _, tt := range []struct {
		path, p string
		want    bool
	}{
		{"a.b", "a", true}, {"a[0]", "a", true}, {"a", "a", true}, {"ab", "a", false},
		{"anything", "", true}, {"a", "a.b", false},
	} {
		if got := within(tt.path, tt.p); got != tt.want {
			t.Errorf("within(%q, %q) = %v, want %v", tt.path, tt.p, got, tt.want)
		}
	}
}

func TestSortErrors(t *testing.T) {
	l := ErrorList{
		{Line: 0, Path: "b"}, {Line: 7, Path: "z"}, {Line: 0, Path: "a"},
		{Line: 3, Path: "y", Msg: "2"}, {Line: 3, Path: "y", Msg: "1"}, {Line: 3, Path: "x"},
	}
	sortErrors(l)
	var got []string
	for _, e := range l {
		got = append(got, e.Error())
	}
	want := []string{"line 3: x: ", "line 3: y: 1", "line 3: y: 2", "line 7: z: ", "a: ", "b: "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order = %q, want %q", got, want)
	}
}

// The decoder supports more kinds than today's schema uses.
func TestDecodeOtherKinds(t *testing.T) {
	type target struct {
		F float64        `yaml:"f"`
		G float32        `yaml:"g"`
		U uint8          `yaml:"u"`
		I int8           `yaml:"i"`
		P *string        `yaml:"p"`
		A any            `yaml:"a"`
		M map[string]int `yaml:"m"`
	}
	decode := func(src string) (target, []string) {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(src), &n); err != nil {
			t.Fatal(err)
		}
		d := newDecoder("t.yaml")
		var v target
		d.decode(n.Content[0], reflect.ValueOf(&v).Elem(), "")
		var errs []string
		for _, e := range d.errs {
			errs = append(errs, e.Error())
		}
		return v, errs
	}
	v, errs := decode("f: 1.5\ng: 2\nu: 255\ni: -128\np: x\na: [1, {b: c}]\nm: {x: 1}\n")
	s := "x"
	want := target{F: 1.5, G: 2, U: 255, I: -128, P: &s, A: []any{1, map[string]any{"b": "c"}}, M: map[string]int{"x": 1}}
	if errs != nil || !reflect.DeepEqual(v, want) {
		t.Errorf("decode = %+v, %q", v, errs)
	}
	_, errs = decode("f: x\nu: -1\ni: 200\nm: {x: y}\na: !!binary 'not base64!'\n")
	wantErrs := []string{
		`t.yaml:1: f: expected a number, got "x"`,
		`t.yaml:2: u: expected a non-negative integer, got "-1"`,
		`t.yaml:3: i: expected an integer, got "200"`,
		`t.yaml:4: m.x: expected an integer, got "y"`,
		`t.yaml:5: a: cannot decode !!binary value "not base64!"`,
	}
	if !reflect.DeepEqual(errs, wantErrs) {
		t.Errorf("errors =\n%q\nwant\n%q", errs, wantErrs)
	}
}

func TestLongValuesAreTruncated(t *testing.T) {
	long := make([]byte, 100)
	for i := range long {
		long[i] = 'a'
	}
	got := truncateQuote(string(long))
	if len(got) > 70 {
		t.Errorf("truncateQuote kept %d bytes: %s", len(got), got)
	}
}

func TestAliasCycles(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"merge of itself", "models:\n  a: &a {<<: *a}\n",
			"c.yaml:4: models.a: document is nested too deeply or expands too many aliases"},
		{"settings containing themselves", "plugins:\n  - path: ./p\n    settings: &s {x: *s}\n",
			"c.yaml:5: plugins[0].settings.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x.x: document is nested too deeply or expands too many aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte("matrix:\n  homeserver: http://x\n"+tt.src), "c.yaml")
			if err == nil || err.Error() != tt.want {
				t.Errorf("error = %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestEnvMasker(t *testing.T) {
	m := newEnvMasker(map[string]string{
		"hunter2-long": "${PW}",
		"hunter2":      "${SHORT}",
		"tok with \"q": "${Q}",
	})
	tests := []struct{ msg, want string }{
		{`bad value "hunter2-long"`, `bad value "${PW}"`},
		{"bare hunter2-long and hunter2", "bare ${PW} and ${SHORT}"},
		{`quoted "tok with \"q"`, `quoted "${Q}"`},
		{"nothing secret", "nothing secret"},
	}
	for _, tt := range tests {
		if got := maskEnv(tt.msg, m); got != tt.want {
			t.Errorf("maskEnv(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
	if got := maskEnv("x", nil); got != "x" {
		t.Errorf("nil masker changed the message: %q", got)
	}
}

func TestErrorListIsCapped(t *testing.T) {
	list := func(n int) ErrorList {
		l := make(ErrorList, n)
		for i := range l {
			l[i] = &Error{File: "c.yaml", Line: n - i, Msg: "bad"}
		}
		return l
	}
	tests := []struct {
		n, entries int
		last       string
	}{
		{MaxErrors, MaxErrors, "c.yaml:50: bad"},
		{MaxErrors + 1, MaxErrors + 1, "c.yaml: and 1 more problem (fix the ones above first)"},
		{MaxErrors + 7, MaxErrors + 1, "c.yaml: and 7 more problems (fix the ones above first)"},
	}
	for _, tt := range tests {
		err := list(tt.n).asError()
		got, ok := err.(ErrorList)
		if !ok || len(got) != tt.entries || got[len(got)-1].Error() != tt.last {
			t.Errorf("%d problems: %d entries, last %q; want %d, %q", tt.n, len(got), got[len(got)-1].Error(), tt.entries, tt.last)
		}
		if got[0].Line != 1 {
			t.Errorf("%d problems: first is line %d, want the lowest line", tt.n, got[0].Line)
		}
	}
}
