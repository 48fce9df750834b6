package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// metric is one metric of the reference.
type metric struct {
	name, kind, help string
	// labels are its label names, the constant ones (one value a process
	// sets) first; values the values of a label that exist from the start.
	labels, constLabels []string
	values              map[string][]string
}

// recorder is a prometheus.Registerer that keeps what is registered.
type recorder struct{ collectors []prometheus.Collector }

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
}

func (r *recorder) Unregister(prometheus.Collector) bool { return false }

// descLine reads what prometheus.Desc's String says: it has no getters.
var descLine = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// describe returns the metrics of collectors, sorted by name: their
// descriptions, their type (from the collector's Go type) and the label
// values they hold at the start.
func describe(collectors []prometheus.Collector) ([]metric, error) {
	var out []metric
	for _, c := range collectors {
		kind, err := kindOf(c)
		if err != nil {
			return nil, err
		}
		values, err := startValues(c)
		if err != nil {
			return nil, err
		}
		ch := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m, err := parseDesc(d.String())
			if err != nil {
				return nil, err
			}
			m.kind, m.values = kind, values
			out = append(out, m)
		}
	}
	slices.SortFunc(out, func(a, b metric) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// parseDesc reads a Desc's name, help and label names.
func parseDesc(s string) (metric, error) {
	g := descLine.FindStringSubmatch(s)
	if g == nil {
		return metric{}, fmt.Errorf("a metric description genmetrics cannot read: %s", s)
	}
	name, err1 := strconv.Unquote(g[1])
	help, err2 := strconv.Unquote(g[2])
	if err := errors.Join(err1, err2); err != nil {
		return metric{}, fmt.Errorf("%s: %w", s, err)
	}
	m := metric{name: name, help: help}
	for _, pair := range splitList(g[3]) {
		label, _, _ := strings.Cut(pair, "=")
		m.constLabels = append(m.constLabels, label)
	}
	m.labels = append(m.labels, m.constLabels...)
	m.labels = append(m.labels, splitList(g[4])...)
	return m, nil
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// kindOf is a collector's metric type. A Gauge has a Counter's methods
// too: it is asked first.
func kindOf(c prometheus.Collector) (string, error) {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter", nil
	case *prometheus.GaugeVec:
		return "gauge", nil
	case *prometheus.HistogramVec:
		return "histogram", nil
	case prometheus.Gauge:
		return "gauge", nil
	case prometheus.Counter:
		return "counter", nil
	case prometheus.Histogram:
		return "histogram", nil
	}
	return "", fmt.Errorf("a collector of a type genmetrics does not know: %T", c)
}

// startValues are the values of each label that c holds series of before
// anything is recorded, sorted.
func startValues(c prometheus.Collector) (map[string][]string, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, err
	}
	fams, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, p := range m.GetLabel() {
				out[p.GetName()] = append(out[p.GetName()], p.GetValue())
			}
		}
	}
	for k := range out {
		slices.Sort(out[k])
		out[k] = slices.Compact(out[k])
	}
	return out, nil
}

// writeMetrics writes a table of ms.
func writeMetrics(b *strings.Builder, ms []metric) {
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range ms {
		labels := make([]string, len(m.labels))
		for i, l := range m.labels {
			labels[i] = "`" + l + "`"
			if vs := m.values[l]; len(vs) > 0 && !slices.Contains(m.constLabels, l) {
				labels[i] += " (" + strings.Join(vs, ", ") + ")"
			}
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, strings.Join(labels, ", "), cell(m.help))
	}
	b.WriteString("\n")
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
