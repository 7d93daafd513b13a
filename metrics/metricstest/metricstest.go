package metricstest

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families are parsed metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads exposition text (the text format /metrics serves).
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("failed to parse metrics: %w", err)
	}
	return fams, nil
}

// Labels selects series: every label given must match; others may be
// anything.
type Labels map[string]string

// Series returns the series of the family name whose labels match.
func (f Families) Series(name string, want Labels) []*dto.Metric {
	fam, ok := f[name]
	if !ok {
		return nil
	}
	var out []*dto.Metric
	for _, m := range fam.GetMetric() {
		if matches(m, want) {
			out = append(out, m)
		}
	}
	return out
}

func matches(m *dto.Metric, want Labels) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// Value returns the value of the one series of name that matches want:
// a counter's or gauge's value, a histogram's sample count. ok is false
// when no series matches; more than one is an error.
func (f Families) Value(name string, want Labels) (v float64, ok bool, err error) {
	series := f.Series(name, want)
	switch len(series) {
	case 0:
		return 0, false, nil
	case 1:
	default:
		return 0, false, fmt.Errorf("%d series of %s match %v", len(series), name, want)
	}
	m := series[0]
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue(), true, nil
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true, nil
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount()), true, nil
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true, nil
	}
	return 0, false, fmt.Errorf("series of %s has no value", name)
}

// Sum adds up the values (histograms: sample counts) of every series of
// name that matches want.
func (f Families) Sum(name string, want Labels) float64 {
	var sum float64
	for _, m := range f.Series(name, want) {
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

// Names lists the family names with prefix, sorted (for failure messages).
func (f Families) Names(prefix string) []string {
	var out []string
	for n := range f {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
