package admin

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentgateway/gateway/internal/admin/admintest"
)

func scrape(t *testing.T, m *Metrics) admintest.Samples {
	t.Helper()
	var b bytes.Buffer
	m.WritePrometheus(&b)
	s, err := admintest.Parse(&b)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, b.String())
	}
	return s
}

func TestEveryNameIsPrefixed(t *testing.T) {
	m := NewMetrics()
	m.Counter("things_total", "kind", "a").Inc()
	m.Gauge("level", func() float64 { return 3 })
	m.Writer(func(w io.Writer) {
		f := NewFamily(w, "pair", "gauge")
		f.Sample(1, "side", "left")
		f.Sample(2, "side", "right")
	})
	s := scrape(t, m)
	for _, name := range s.Names() {
		if !strings.HasPrefix(name, Prefix) {
			t.Errorf("metric %s lacks the prefix %s", name, Prefix)
		}
	}
	// The process's and the runtime's own metrics, prefixed.
	for _, name := range []string{"gateway_process_resident_memory_bytes", "gateway_go_goroutines"} {
		if s.Get(name) <= 0 {
			t.Errorf("%s = %v, want a positive value", name, s.Get(name))
		}
	}
	want := map[string]float64{
		`gateway_things_total{kind="a"}`: 1,
		`gateway_level`:                  3,
		`gateway_pair{side="left"}`:      1,
		`gateway_pair{side="right"}`:     2,
	}
	for series, v := range want {
		if got := s.Get(series); got != v {
			t.Errorf("%s = %v, want %v", series, got, v)
		}
	}
}

func TestLabelValuesAreEscapedAndCut(t *testing.T) {
	m := NewMetrics()
	odd := "a \"quoted\" back\\slash\nnew line"
	m.Counter("odd_total", "tool", odd).Inc()
	long := strings.Repeat("é", 80) // 160 bytes
	m.Counter("long_total", "tool", long).Inc()
	s := scrape(t, m)
	if got := s.Sum("gateway_odd_total", "tool", odd); got != 1 {
		t.Errorf("the escaped label did not read back: %v", got)
	}
	if got := s.Sum("gateway_long_total", "tool", strings.Repeat("é", maxLabelValue/2)); got != 1 {
		t.Errorf("the long label was not cut to %d bytes whole runes: %v", maxLabelValue, got)
	}
}

func TestSeriesBeyondTheBoundAreOther(t *testing.T) {
	m := NewMetrics()
	for i := range maxSeries + 10 {
		m.Counter("tools_total", "tool", fmt.Sprint("t", i), "outcome", "ok").Inc()
	}
	s := scrape(t, m)
	if got := s.Get(`gateway_tools_total{tool="other",outcome="other"}`); got != 10 {
		t.Errorf("other = %v, want 10", got)
	}
	if got := s.Sum("gateway_tools_total"); got != maxSeries+10 {
		t.Errorf("total = %v, want %d: nothing is lost", got, maxSeries+10)
	}
}

func TestWritePrefixed(t *testing.T) {
	in := "# HELP go_x\n# TYPE go_x gauge\ngo_x 1\nprocess_y{a=\"b\"} 2\n\n"
	var out bytes.Buffer
	writePrefixed(&out, strings.NewReader(in))
	want := "# HELP gateway_go_x\n# TYPE gateway_go_x gauge\ngateway_go_x 1\ngateway_process_y{a=\"b\"} 2\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
