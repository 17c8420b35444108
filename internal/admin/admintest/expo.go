// Package admintest reads what the admin server exposes, for tests: the
// Prometheus text format parsed into numbers, so that tests compare
// values rather than substrings.
package admintest

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Sample is one line of an exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the lines of an exposition.
type Samples struct {
	list  []Sample
	byKey map[string]int
}

// Parse reads the Prometheus text format. It fails on a malformed line, a
// series given twice, and a second # TYPE line for the same metric, all
// of which Prometheus refuses.
func Parse(r io.Reader) (Samples, error) {
	out := Samples{byKey: map[string]int{}}
	typed := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if typed[name] {
				return Samples{}, fmt.Errorf("line %d: a second TYPE line for %s", n, name)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			return Samples{}, fmt.Errorf("line %d: no value: %q", n, line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return Samples{}, fmt.Errorf("line %d: value: %w", n, err)
		}
		name, labels, err := parseSeries(line[:i])
		if err != nil {
			return Samples{}, fmt.Errorf("line %d: %w", n, err)
		}
		key := keyOf(name, labels)
		if _, dup := out.byKey[key]; dup {
			return Samples{}, fmt.Errorf("line %d: %s given twice", n, key)
		}
		out.byKey[key] = len(out.list)
		out.list = append(out.list, Sample{Name: name, Labels: labels, Value: v})
	}
	return out, sc.Err()
}

// parseSeries splits name{a="x",b="y"} into the name and the labels.
func parseSeries(s string) (string, map[string]string, error) {
	labels := map[string]string{}
	name, rest, ok := strings.Cut(strings.TrimSpace(s), "{")
	if !ok {
		return name, labels, nil
	}
	rest, ok = strings.CutSuffix(rest, "}")
	if !ok {
		return "", nil, fmt.Errorf("unclosed labels in %q", s)
	}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, after, ok := strings.Cut(rest, "=")
		if !ok || !strings.HasPrefix(after, `"`) {
			return "", nil, fmt.Errorf("bad label in %q", s)
		}
		// The value runs to the first quote not escaped.
		var b strings.Builder
		i := 1
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
				if after[i] == 'n' {
					b.WriteByte('\n')
				} else {
					b.WriteByte(after[i])
				}
				continue
			}
			b.WriteByte(after[i])
		}
		if i >= len(after) {
			return "", nil, fmt.Errorf("unclosed label value in %q", s)
		}
		labels[strings.TrimSpace(k)] = b.String()
		rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(after[i+1:]), ","))
	}
	return name, labels, nil
}

func keyOf(name string, labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+"="+strconv.Quote(labels[k]))
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func mustKey(series string) string {
	name, labels, err := parseSeries(series)
	if err != nil {
		panic(err)
	}
	return keyOf(name, labels)
}

// Get is the value of one series, given as name{labels} in any label
// order; 0 when it is absent.
func (s Samples) Get(series string) float64 {
	if i, ok := s.byKey[mustKey(series)]; ok {
		return s.list[i].Value
	}
	return 0
}

// Has reports whether the series is present.
func (s Samples) Has(series string) bool {
	_, ok := s.byKey[mustKey(series)]
	return ok
}

// Sum adds the values of every series of metric name whose labels
// include all of match (name, value pairs).
func (s Samples) Sum(name string, match ...string) float64 {
	var total float64
	for _, smp := range s.list {
		if smp.Name != name {
			continue
		}
		all := true
		for i := 0; i+1 < len(match); i += 2 {
			if v, ok := smp.Labels[match[i]]; !ok || v != match[i+1] {
				all = false
				break
			}
		}
		if all {
			total += smp.Value
		}
	}
	return total
}

// Names lists the metric names present, sorted.
func (s Samples) Names() []string {
	seen := map[string]bool{}
	for _, smp := range s.list {
		seen[smp.Name] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

// Scrape GETs url (an admin server's /metrics) with the bearer token, if
// any, and parses the answer.
func Scrape(tb testing.TB, url, token string) Samples {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET %s: %s", url, resp.Status)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	return s
}
