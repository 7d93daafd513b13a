package config

import (
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a length of time. config.yaml writes it the way Go does:
// "500ms", "90s", "15m", "1h", "1h30m".
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String writes d as time.Duration does ("1m30s").
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration in the form it is read.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) decodeNode(dec *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		*d = 0
		return
	}
	const want = "a duration (like 500ms, 90s, 15m, 1h or 1h30m)"
	if n.Kind != yaml.ScalarNode {
		dec.typeError(n, path, want)
		return
	}
	v, err := time.ParseDuration(strings.TrimSpace(n.Value))
	if err != nil {
		dec.typeError(n, path, want)
		return
	}
	*d = Duration(v)
}
