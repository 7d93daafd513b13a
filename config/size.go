package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ByteSize is a size in bytes. config.yaml writes it as a plain integer
// (bytes) or as a number with a unit: "256KiB", "20MiB", "1GiB" (powers of
// 1024), "500KB", "20MB" (powers of 1000) or "100B". Spaces between the
// number and the unit are allowed; units are case-insensitive.
type ByteSize int64

// Size units, powers of 1024.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

var sizeUnits = map[string]ByteSize{
	"": 1, "b": 1,
	"kib": KiB, "mib": MiB, "gib": GiB,
	"k": 1000, "kb": 1000, "m": 1000 * 1000, "mb": 1000 * 1000, "g": 1000 * 1000 * 1000, "gb": 1000 * 1000 * 1000,
}

// ParseByteSize parses a size as config.yaml writes it (see ByteSize).
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%q is not a size (write bytes, or a number with KiB, MiB, GiB, KB, MB or GB)", s)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: bad number", s)
	}
	v := f * float64(mult)
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return ByteSize(math.Round(v)), nil
}

// String writes the size the way people read it: "20 MiB", "256 KiB",
// "1.5 MiB", "100 B".
func (s ByteSize) String() string {
	switch {
	case s >= GiB:
		return trimUnit(float64(s)/float64(GiB), "GiB")
	case s >= MiB:
		return trimUnit(float64(s)/float64(MiB), "MiB")
	case s >= KiB:
		return trimUnit(float64(s)/float64(KiB), "KiB")
	}
	return strconv.FormatInt(int64(s), 10) + " B"
}

func trimUnit(v float64, unit string) string {
	return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) + " " + unit
}

// MarshalYAML writes the size in the form ParseByteSize reads back.
func (s ByteSize) MarshalYAML() (any, error) {
	if s%KiB == 0 && s != 0 {
		return strings.ReplaceAll(s.String(), " ", ""), nil
	}
	return int64(s), nil
}

func (s *ByteSize) decodeNode(d *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		*s = 0
		return
	}
	// Errors quote the value through the decoder, which marks values that
	// came from ${VAR} substitution.
	const want = "a size (bytes, or a number with a unit such as 256KiB or 20MiB)"
	if n.Kind != yaml.ScalarNode {
		d.typeError(n, path, want)
		return
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		d.typeError(n, path, want)
		return
	}
	*s = v
}
