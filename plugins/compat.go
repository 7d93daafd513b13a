package plugins

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// VersionRange is the set of hookroom versions a plugin works with, as its
// manifest's "hookroom" key gives it:
//
//	">=0.5, <2"           at least 0.5.0 and below 2.0.0
//	">=0.5, <0.9 || >=1.2"  either
//	"1.4.2"               exactly 1.4.2 (as "=1.4.2")
//
// A range is one or more alternatives joined by "||"; an alternative is
// one or more comparisons joined by ",", all of which must hold. A
// comparison is an operator (>=, >, <=, <, =, ==, !=; none means =) and a
// version MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], an optional leading
// "v" allowed; missing parts are 0, so "<2" is "<2.0.0". Versions compare
// by semantic-versioning precedence: numbers numerically, a pre-release
// below its release (2.0.0-rc.1 < 2.0.0), build metadata ignored. The zero
// VersionRange allows every version.
type VersionRange struct {
	text string
	alts [][]comparison
}

type comparison struct {
	op string
	v  Version
}

// Version is a parsed semantic version (see VersionRange).
type Version struct {
	Major, Minor, Patch int
	// Pre is the pre-release ("rc.1"), "" for a release.
	Pre string
}

// ErrIncompatible is wrapped by the error CheckCompatible returns when the
// manifest's range excludes the running hookroom.
var ErrIncompatible = errors.New("incompatible with this hookroom")

// ParseVersion parses MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], with an
// optional leading "v".
func ParseVersion(s string) (Version, error) {
	orig := s
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	s, _, _ = strings.Cut(s, "+")
	s, pre, hasPre := strings.Cut(s, "-")
	if hasPre {
		for id := range strings.SplitSeq(pre, ".") {
			if id == "" || strings.IndexFunc(id, func(r rune) bool {
				return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-')
			}) >= 0 {
				return Version{}, fmt.Errorf("invalid version %q: bad pre-release %q", orig, pre)
			}
		}
	}
	parts := strings.Split(s, ".")
	if len(parts) > 3 || s == "" {
		return Version{}, fmt.Errorf("invalid version %q: want MAJOR[.MINOR[.PATCH]]", orig)
	}
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || p[0] == '+' || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("invalid version %q: %q is not a number", orig, p)
		}
		nums[i] = n
	}
	return Version{Major: nums[0], Minor: nums[1], Patch: nums[2], Pre: pre}, nil
}

func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Compare returns -1, 0 or +1 as v is below, equal to or above w by
// semantic-versioning precedence.
func (v Version) Compare(w Version) int {
	if c := cmp.Or(cmp.Compare(v.Major, w.Major), cmp.Compare(v.Minor, w.Minor), cmp.Compare(v.Patch, w.Patch)); c != 0 {
		return c
	}
	switch {
	case v.Pre == w.Pre:
		return 0
	case v.Pre == "":
		return 1
	case w.Pre == "":
		return -1
	}
	a, b := strings.Split(v.Pre, "."), strings.Split(w.Pre, ".")
	for i := range min(len(a), len(b)) {
		an, aerr := strconv.Atoi(a[i])
		bn, berr := strconv.Atoi(b[i])
		var c int
		switch {
		case aerr == nil && berr == nil:
			c = cmp.Compare(an, bn)
		case aerr == nil: // numeric identifiers sort below alphanumeric ones
			c = -1
		case berr == nil:
			c = 1
		default:
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

var rangeOps = []string{">=", "<=", "==", "!=", ">", "<", "="} // longest first

// ParseVersionRange parses a range (see VersionRange).
func ParseVersionRange(s string) (VersionRange, error) {
	r := VersionRange{text: strings.TrimSpace(s)}
	if r.text == "" {
		return VersionRange{}, errors.New("empty version range")
	}
	for alt := range strings.SplitSeq(s, "||") {
		var cs []comparison
		for c := range strings.SplitSeq(alt, ",") {
			c = strings.TrimSpace(c)
			if c == "" {
				return VersionRange{}, fmt.Errorf("invalid version range %q: empty comparison", r.text)
			}
			op := "="
			for _, o := range rangeOps {
				if rest, ok := strings.CutPrefix(c, o); ok {
					op, c = o, strings.TrimSpace(rest)
					break
				}
			}
			if op == "==" {
				op = "="
			}
			v, err := ParseVersion(c)
			if err != nil {
				return VersionRange{}, fmt.Errorf("invalid version range %q: %w", r.text, err)
			}
			cs = append(cs, comparison{op: op, v: v})
		}
		r.alts = append(r.alts, cs)
	}
	return r, nil
}

// String returns the range as it was written ("" for the zero range).
func (r VersionRange) String() string { return r.text }

// Allows reports whether v is in the range.
func (r VersionRange) Allows(v Version) bool {
	if len(r.alts) == 0 {
		return true
	}
	return slices.ContainsFunc(r.alts, func(cs []comparison) bool {
		for _, c := range cs {
			d := v.Compare(c.v)
			ok := false
			switch c.op {
			case ">=":
				ok = d >= 0
			case ">":
				ok = d > 0
			case "<=":
				ok = d <= 0
			case "<":
				ok = d < 0
			case "=":
				ok = d == 0
			case "!=":
				ok = d != 0
			}
			if !ok {
				return false
			}
		}
		return true
	})
}

// CheckCompatible checks m's hookroom range against the running hookroom's
// version. A manifest without a range is compatible with every version. An
// error wrapping ErrIncompatible says which range excludes which version;
// ok is false (and err nil) when hookroomVersion is not a version (a
// development build, "dev"), so that the caller can warn and go on.
func CheckCompatible(m *Manifest, hookroomVersion string) (ok bool, err error) {
	if m.Hookroom == "" {
		return true, nil
	}
	r, err := ParseVersionRange(m.Hookroom)
	if err != nil {
		return false, err
	}
	v, err := ParseVersion(hookroomVersion)
	if err != nil {
		return false, nil
	}
	if !r.Allows(v) {
		return false, fmt.Errorf("plugin %s %s needs hookroom %s, this is %s: %w", m.Name, m.Version, r, v, ErrIncompatible)
	}
	return true, nil
}
