package cost

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var zone = time.FixedZone("test", 2*3600)

// at is a time on a Wednesday in November 2026, in zone.
func at(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, zone) }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestReportSumsByPeriodChannelAndKind(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	l, err := Open(path, zone)
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{
		{Time: at(25, 10), Channel: "a", Kind: "message", CostUSD: 1},      // today (Wed 25th)
		{Time: at(25, 11), Channel: "a", Kind: "heartbeat", CostUSD: 0.25}, // today
		{Time: at(25, 12), Channel: "b", Kind: "message", CostUSD: 2},      // today, other channel
		{Time: at(23, 9), Channel: "a", Kind: "cron", CostUSD: 4},          // Monday: this week
		{Time: at(22, 23), Channel: "a", Kind: "message", CostUSD: 8},      // Sunday: last week, this month
		{Time: at(1, 1), Kind: "webhook", CostUSD: 16, Estimate: true},     // this month, no channel
		{Time: time.Date(2026, 10, 31, 23, 0, 0, 0, zone), Channel: "a", Kind: "message", CostUSD: 32},
	}
	for _, e := range entries {
		if err := l.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Ledger) {
		t.Helper()
		r := l.Report(at(25, 20), "a")
		for _, c := range []struct {
			name      string
			got, want float64
		}{
			{"channel today", r.Today.USD, 1.25},
			{"channel week", r.Week.USD, 5.25},
			{"channel month", r.Month.USD, 13.25},
			{"gateway today", r.GatewayToday.USD, 3.25},
			{"gateway week", r.GatewayWeek.USD, 7.25},
			{"gateway month", r.GatewayMonth.USD, 31.25},
			{"channel today heartbeat", r.Today.ByKind["heartbeat"], 0.25},
			{"gateway month webhook", r.GatewayMonth.ByKind["webhook"], 16},
		} {
			if !near(c.got, c.want) {
				t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
			}
		}
		if r.Month.Estimate || !r.GatewayMonth.Estimate {
			t.Errorf("estimate flags: channel %v gateway %v", r.Month.Estimate, r.GatewayMonth.Estimate)
		}
		text := r.Render()
		for _, want := range []string{"Today: **$1.25**", "heartbeat $0.2500", "webhooks $16.00", "(estimate)"} {
			if !strings.Contains(text, want) {
				t.Errorf("report lacks %q:\n%s", want, text)
			}
		}
	}
	check(l)
	l.Close()
	// A torn last line and garbage are skipped on reopening.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("not json\n{\"time\":\"2026-11-25T10:00:00Z\",\"cost_u")
	f.Close()
	l2, err := Open(path, zone)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.Skipped() != 2 {
		t.Errorf("Skipped = %d, want 2", l2.Skipped())
	}
	// Entries older than the kept days are not summed; the rest are.
	_ = l2
}

func TestBudgetLevelsAndLifts(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	l, _ := Open(path, zone)
	b := Budget{DailyUSD: 10, ChannelDailyUSD: 1}
	now := at(25, 12)
	spend := func(ch string, usd float64) { l.Record(Entry{Time: now, Channel: ch, Kind: "message", CostUSD: usd}) }
	if v := l.Check(b, now, "a"); v.Level != LevelOK || v.Text() != "" {
		t.Fatalf("fresh = %+v", v)
	}
	spend("a", 0.79)
	if v := l.Check(b, now, "a"); v.Level != LevelOK {
		t.Fatalf("79 %% = %+v", v)
	}
	spend("a", 0.01)
	if v := l.Check(b, now, "a"); v.Level != LevelWarn || !v.Channel || !strings.Contains(v.Text(), "80 %") {
		t.Fatalf("80 %% = %+v %q", v, v.Text())
	}
	spend("a", 0.2)
	v := l.Check(b, now, "a")
	if v.Level != LevelOver || !v.Channel {
		t.Fatalf("100 %% = %+v", v)
	}
	if l.Check(b, now, "b").Level != LevelOK {
		t.Fatal("another channel is over too")
	}
	spend("b", 9)
	if v := l.Check(b, now, "c"); v.Level != LevelOver || v.Channel {
		t.Fatalf("gateway at 100 %% = %+v", v)
	}
	if err := l.Lift(now, "", "op"); err != nil {
		t.Fatal(err)
	}
	if err := l.Lift(now, "a", "op"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, _ = Open(path, zone)
	defer l.Close()
	if v := l.Check(b, now, "a"); v.Level != LevelOK {
		t.Fatalf("lifted, after reopening = %+v", v)
	}
	if v := l.Check(b, now, "b"); v.Level != LevelOver || !v.Channel {
		t.Fatalf("b's own budget is not lifted = %+v", v)
	}
	if l.Lifted(now.AddDate(0, 0, 1), "") {
		t.Fatal("a lift outlived its day")
	}
}

// Whatever is recorded, the report's sums agree with a plain sum and its
// text stays within a Discord message.
func TestReportProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []string{"message", "heartbeat", "cron", "hook", "webhook", "other"}
	for range 50 {
		l, _ := Open("", zone)
		now := at(25, 23)
		var today float64
		for range rng.IntN(200) {
			e := Entry{Time: now.Add(-time.Duration(rng.IntN(30*24)) * time.Hour), Channel: []string{"a", "b", ""}[rng.IntN(3)],
				Kind: kinds[rng.IntN(len(kinds))], CostUSD: rng.Float64() * 100, Estimate: rng.IntN(5) == 0}
			l.Record(e)
			if l.dayKey(e.Time) == l.dayKey(now) {
				today += e.CostUSD
			}
		}
		r := l.Report(now, "a")
		if !near(r.GatewayToday.USD, today) {
			t.Fatalf("gateway today = %v, want %v", r.GatewayToday.USD, today)
		}
		if r.GatewayToday.USD > r.GatewayWeek.USD+1e-9 || r.Today.USD > r.GatewayToday.USD+1e-9 {
			t.Fatalf("sums out of order: %+v", r)
		}
		if n := utf8.RuneCountInString(r.Render()); n > 2000 {
			t.Fatalf("report of %d characters", n)
		}
	}
}

func FuzzOpen(f *testing.F) {
	f.Add([]byte(`{"time":"2026-11-25T10:00:00Z","kind":"message","cost_usd":1}` + "\n" + `{"lift":{"day":"2026-11-25"}}`))
	f.Add([]byte("\x00\xff{"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), FileName)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		l, err := Open(path, zone)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer l.Close()
		l.Report(time.Now(), "a").Render()
		l.Check(Budget{DailyUSD: 1, ChannelDailyUSD: 1}, time.Now(), "a").Text()
	})
}

// The file is written behind the totals: Flush puts what was recorded on
// disk, and a write that fails is reported while the totals stay right.
func TestWriteBehind(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	l, err := Open(path, zone)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		l.Record(Entry{Time: at(25, 10), Channel: "a", Kind: "message", CostUSD: 0.01})
	}
	l.Flush()
	data, _ := os.ReadFile(path)
	if n := strings.Count(string(data), "\n"); n != 100 {
		t.Fatalf("%d lines on disk after Flush, want 100", n)
	}
	l.Close()

	errs := make(chan error, 10)
	bad, _ := Open(filepath.Join(dir, "missing", FileName), zone)
	bad.OnError(func(err error) { errs <- err })
	bad.Record(Entry{Time: at(25, 10), Kind: "message", CostUSD: 2})
	bad.Flush()
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "cost ledger") {
			t.Errorf("error = %v", err)
		}
	default:
		t.Fatal("a failed write was not reported")
	}
	if gw, _ := bad.Spent(at(25, 11), ""); gw != 2 {
		t.Errorf("total after a failed write = %v, want 2", gw)
	}
	bad.Close()
}

// An entry appended after a crash left a torn last line is not glued to
// it: it reads back after reopening.
func TestAppendAfterATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(path, []byte(`{"time":"2026-11-25T08:00:00+02:00","kind":"message","cost_usd":1}`+"\n"+`{"time":"2026-11-25T09:00:00+02:00","kind":"mes`), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _ := Open(path, zone)
	if err := l.Record(Entry{Time: at(25, 10), Kind: "message", CostUSD: 2}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, _ = Open(path, zone)
	defer l.Close()
	if gw, _ := l.Spent(at(25, 12), ""); gw != 3 {
		t.Fatalf("spent after reopening = %v, want 3 (the torn line skipped, the new entry kept)", gw)
	}
	if l.Skipped() != 1 {
		t.Errorf("Skipped = %d, want 1", l.Skipped())
	}
}

func TestRecordRefusesInvalidEntries(t *testing.T) {
	l, _ := Open("", zone)
	for _, e := range []Entry{
		{Kind: "message", CostUSD: 1},
		{Time: at(25, 1), CostUSD: math.NaN()},
		{Time: at(25, 1), CostUSD: math.Inf(1)},
		{Time: at(25, 1), CostUSD: -1},
		{Time: at(25, 1), InputTokens: -5},
	} {
		if err := l.Record(e); !errors.Is(err, ErrInvalid) {
			t.Errorf("Record(%+v) = %v, want ErrInvalid", e, err)
		}
	}
	if gw, _ := l.Spent(at(25, 2), ""); gw != 0 {
		t.Errorf("invalid entries were counted: %v", gw)
	}
}
