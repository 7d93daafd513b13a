package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hookroom/hookroom/plugins/process/internal/jsonscan"
)

func members(t testing.TB, data string) (map[string]string, []string, error) {
	t.Helper()
	m := map[string]string{}
	var order []string
	err := jsonscan.Object([]byte(data), func(k string, v []byte) error {
		m[k] = string(v)
		order = append(order, k)
		return nil
	})
	return m, order, err
}

func TestObject(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", `{}`, map[string]string{}},
		{"spaces", " \t{ \"a\" : 1 , \"b\":\"x\" }\r\n", map[string]string{"a": "1", "b": `"x"`}},
		{"nested", `{"p":{"c":{"d":[1,{"e":"}"}]}},"n":null,"t":true,"f":false}`, map[string]string{"p": `{"c":{"d":[1,{"e":"}"}]}}`, "n": "null", "t": "true", "f": "false"}},
		{"escapes", `{"k\"ey":"va\\\"l","u":"\u00e9"}`, map[string]string{`k"ey`: `"va\\\"l"`, "u": `"\u00e9"`}},
		{"numbers", `{"a":-1.5e+3,"b":0,"c":[]}`, map[string]string{"a": "-1.5e+3", "b": "0", "c": "[]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := members(t, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("member %q = %s, want %s", k, got[k], v)
				}
			}
		})
	}
}

func TestObjectRejects(t *testing.T) {
	for _, in := range []string{
		``, `[]`, `"x"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":"x}`, `{"a":tru}`,
		`{"a":[1,2}`, `{"a":{"b":1]}`, `{a:1}`, `{"a":1}x`, `{"a":@}`,
	} {
		if _, _, err := members(t, in); !errors.Is(err, jsonscan.ErrSyntax) {
			t.Errorf("Object(%q): err = %v, want ErrSyntax", in, err)
		}
	}
}

func TestScalars(t *testing.T) {
	if s, err := jsonscan.String([]byte(`"a\nb"`)); err != nil || s != "a\nb" {
		t.Errorf("String = %q, %v", s, err)
	}
	if _, err := jsonscan.String([]byte(`12`)); err == nil {
		t.Error("String(12) succeeded")
	}
	if n, err := jsonscan.Uint([]byte(`42`)); err != nil || n != 42 {
		t.Errorf("Uint = %d, %v", n, err)
	}
	if _, err := jsonscan.Uint([]byte(`-1`)); err == nil {
		t.Error("Uint(-1) succeeded")
	}
	if n, err := jsonscan.Int([]byte(`-7`)); err != nil || n != -7 {
		t.Errorf("Int = %d, %v", n, err)
	}
}

// Whatever encoding/json accepts as an object, Object splits the same way.
func FuzzObjectAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,"x",null]},"c":"\u0041"}`, `{"k":"\"}"}`, `{"a":1e5,"b":-0.5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(data, &want) != nil || want == nil {
			return
		}
		got := map[string][]byte{}
		err := jsonscan.Object(data, func(k string, v []byte) error {
			got[k] = v
			return nil
		})
		if err != nil {
			t.Fatalf("Object(%q): %v", data, err)
		}
		for k, v := range want {
			if !bytes.Equal(bytes.TrimSpace(got[k]), bytes.TrimSpace(v)) {
				t.Fatalf("Object(%q): member %q = %q, want %q", data, k, got[k], v)
			}
		}
	})
}
