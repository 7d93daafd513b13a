package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Duration is a length of time. config.yaml writes it the way Go does:
// "90s", "15m", "1h", "1h30m".
type Duration time.Duration

// MarshalYAML writes the duration in the form it is read.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

func (d *Duration) decodeNode(dec *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		*d = 0
		return
	}
	const want = "a duration (like 90s, 15m, 1h or 1h30m)"
	if n.Kind != yaml.ScalarNode {
		dec.typeError(n, path, want)
		return
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		dec.typeError(n, path, want)
		return
	}
	*d = Duration(v)
}
