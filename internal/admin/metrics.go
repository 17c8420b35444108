package admin

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/VictoriaMetrics/metrics"
)

// Prefix starts the name of every metric the admin server exposes.
const Prefix = "gateway_"

// maxSeries bounds the label combinations of one metric: beyond it, new
// combinations are counted under the label values "other". Tool and model
// names come from the CLI, routes from Discord's API: a few dozen each.
const maxSeries = 500

// maxLabelValue bounds a label value, in bytes.
const maxLabelValue = 100

// Buckets of the histograms, in seconds.
var (
	waitBuckets        = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900}
	turnBuckets        = []float64{0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}
	firstOutputBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// Metrics holds the gateway's metrics and writes them in the Prometheus
// text format. Series are created as they are first used; values read at
// each scrape are registered with Gauge and Writer. It is safe for
// concurrent use.
type Metrics struct {
	set *metrics.Set

	mu sync.Mutex // guards series
	// series counts the label combinations created per metric.
	series map[string]map[string]bool
}

// NewMetrics returns an empty set of metrics.
func NewMetrics() *Metrics {
	// The library's switch for # TYPE lines is process-wide; nothing else
	// in the gateway uses the library.
	metrics.ExposeMetadata(true)
	return &Metrics{set: metrics.NewSet(), series: map[string]map[string]bool{}}
}

// WritePrometheus writes every metric, the process's and the Go
// runtime's included, in the Prometheus text format.
func (m *Metrics) WritePrometheus(w io.Writer) {
	m.set.WritePrometheus(w)
	var b bytes.Buffer
	metrics.WriteProcessMetrics(&b)
	writePrefixed(w, &b)
}

// writePrefixed copies exposition lines from r to w with Prefix put before
// each metric name: process_resident_memory_bytes becomes
// gateway_process_resident_memory_bytes.
func writePrefixed(w io.Writer, r io.Reader) {
	bw := bufio.NewWriter(w)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "# HELP "), strings.HasPrefix(line, "# TYPE "):
			bw.WriteString(line[:len("# HELP ")] + Prefix + line[len("# HELP "):])
		case strings.HasPrefix(line, "#"):
			bw.WriteString(line)
		default:
			bw.WriteString(Prefix + line)
		}
		bw.WriteByte('\n')
	}
	bw.Flush()
}

// Counter returns the counter name{labels}; labels are name, value
// pairs.
func (m *Metrics) Counter(name string, labels ...string) *metrics.Counter {
	return m.set.GetOrCreateCounter(m.seriesName(name, labels))
}

// FloatCounter returns the float counter name{labels}.
func (m *Metrics) FloatCounter(name string, labels ...string) *metrics.FloatCounter {
	return m.set.GetOrCreateFloatCounter(m.seriesName(name, labels))
}

// Histogram returns the histogram name{labels} with the given bucket
// bounds (seconds).
func (m *Metrics) Histogram(name string, buckets []float64, labels ...string) *metrics.PrometheusHistogram {
	return m.set.GetOrCreatePrometheusHistogramExt(m.seriesName(name, labels), buckets)
}

// Gauge registers a gauge read by f at each scrape.
func (m *Metrics) Gauge(name string, f func() float64) {
	m.set.GetOrCreateGauge(Prefix+name, f)
}

// Writer registers a function that writes metrics at each scrape, for
// values read together (one lock, one pass over a store). It writes with
// a Family.
func (m *Metrics) Writer(f func(w io.Writer)) {
	m.set.RegisterMetricsWriter(f)
}

// seriesName is Prefix+name{labels}, with the label values escaped and
// cut; past maxSeries combinations of name, the values are "other".
func (m *Metrics) seriesName(name string, labels []string) string {
	if len(labels) == 0 {
		return Prefix + name
	}
	s := Prefix + name + labelSet(labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	known := m.series[name]
	if known == nil {
		known = map[string]bool{}
		m.series[name] = known
	}
	if known[s] {
		return s
	}
	if len(known) >= maxSeries {
		other := make([]string, len(labels))
		for i := range labels {
			other[i] = labels[i]
			if i%2 == 1 {
				other[i] = "other"
			}
		}
		return Prefix + name + labelSet(other)
	}
	known[s] = true
	return s
}

// labelSet renders name, value pairs as {a="x",b="y"}.
func labelSet(labels []string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(labels[i])
		b.WriteString(`="`)
		b.WriteString(labelValue(labels[i+1]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// labelValue escapes v for the exposition format (backslash, double quote,
// line feed) and cuts it to maxLabelValue bytes.
func labelValue(v string) string {
	if len(v) > maxLabelValue {
		v = strings.ToValidUTF8(v[:maxLabelValue], "")
	}
	if !utf8.ValidString(v) {
		v = strings.ToValidUTF8(v, "\uFFFD")
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// Family writes one metric's samples from a Writer function: its # TYPE
// line once, then each sample.
type Family struct {
	w    io.Writer
	name string
	typ  string
	head bool
}

// NewFamily starts the metric name (without Prefix) of type typ (gauge,
// counter) on w.
func NewFamily(w io.Writer, name, typ string) *Family {
	return &Family{w: w, name: Prefix + name, typ: typ}
}

// Sample writes one sample; labels are name, value pairs.
func (f *Family) Sample(v float64, labels ...string) {
	if !f.head {
		fmt.Fprintf(f.w, "# HELP %s\n# TYPE %s %s\n", f.name, f.name, f.typ)
		f.head = true
	}
	name := f.name
	if len(labels) > 0 {
		name += labelSet(labels)
	}
	fmt.Fprintf(f.w, "%s %g\n", name, v)
}
