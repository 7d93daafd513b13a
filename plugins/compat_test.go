package plugins_test

import (
	"errors"
	"testing"

	"github.com/hookroom/hookroom/plugins"
)

func TestVersionRange(t *testing.T) {
	tests := []struct {
		rng     string
		allowed []string
		denied  []string
	}{
		{">=0.5, <2", []string{"0.5", "0.5.0", "v0.9.3", "1.99.99", "2.0.0-rc.1"}, []string{"0.4.9", "2.0.0", "2.1", "0.5.0-rc.1"}},
		{">=0.5,<0.9 || >=1.2", []string{"0.5.0", "0.8.9", "1.2.0", "3.0.0"}, []string{"0.9.0", "1.1.9"}},
		{"1.4.2", []string{"1.4.2", "v1.4.2+build.7"}, []string{"1.4.3", "1.4.2-rc.1"}},
		{"== 1.4", []string{"1.4.0"}, []string{"1.4.1"}},
		{"!=1.3.0, >1", []string{"1.0.1", "1.3.1"}, []string{"1.3.0", "1.0.0"}},
		{"<=1.0.0-beta.2", []string{"1.0.0-alpha", "1.0.0-beta", "1.0.0-beta.2", "0.9.0"}, []string{"1.0.0-beta.11", "1.0.0-rc.1", "1.0.0"}},
	}
	for _, tc := range tests {
		r, err := plugins.ParseVersionRange(tc.rng)
		if err != nil {
			t.Errorf("%q: %v", tc.rng, err)
			continue
		}
		for _, s := range append(append([]string{}, tc.allowed...), tc.denied...) {
			v, err := plugins.ParseVersion(s)
			if err != nil {
				t.Errorf("version %q: %v", s, err)
				continue
			}
			want := false
			for _, a := range tc.allowed {
				want = want || a == s
			}
			if got := r.Allows(v); got != want {
				t.Errorf("%q allows %s = %v, want %v", tc.rng, s, got, want)
			}
		}
	}
	for _, bad := range []string{"", ">=", ">=0.5,", "1.2.3.4", ">=01.2", "~1.2", "^1", "1.x", ">=1.0.0-", "1.0.0-rc..1", "|| 1"} {
		if _, err := plugins.ParseVersionRange(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestCheckCompatible(t *testing.T) {
	m := &plugins.Manifest{Name: "geo", Version: "1.2.0", Hookroom: ">=0.5, <2"}
	tests := []struct {
		manifest *plugins.Manifest
		version  string
		ok       bool
		err      string
	}{
		{m, "1.0.0", true, ""},
		{m, "2.0.0", false, "plugin geo 1.2.0 needs hookroom >=0.5, <2, this is 2.0.0: incompatible with this hookroom"},
		{m, "dev", false, ""}, // a development build: unknown, the caller warns
		{&plugins.Manifest{Name: "old"}, "9.0.0", true, ""},
		{&plugins.Manifest{Name: "old"}, "dev", true, ""},
	}
	for _, tc := range tests {
		ok, err := plugins.CheckCompatible(tc.manifest, tc.version)
		if ok != tc.ok || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%s on %s: ok=%v err=%v, want %v %q", tc.manifest.Name, tc.version, ok, err, tc.ok, tc.err)
		}
		if err != nil && !errors.Is(err, plugins.ErrIncompatible) {
			t.Errorf("%v does not wrap ErrIncompatible", err)
		}
	}
}
