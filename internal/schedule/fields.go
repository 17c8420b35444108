package schedule

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
)

// MinInterval is the shortest heartbeat interval (R17.6): a check that asks
// for less is rejected, not clamped, so the operator notices.
const MinInterval = 60 * time.Second

// maxInterval keeps Interval*time.Second from overflowing and catches typos.
const maxInterval = 366 * 24 * time.Hour

var (
	channelRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,20}$`) })
	webhookRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9_-]{1,64}$`) })
	envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
)

// cronDescriptors are the named schedules the standard cron parser accepts
// besides five fields. "@every" is left out: it would allow sub-minute runs.
var cronDescriptors = []string{"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}

// cronReference is the fixed "now" cron expressions are checked against, so
// parsing stays deterministic. An expression that never fires (30 February)
// never fires from any date.
var cronReference = time.Date(2024, time.January, 1, 0, 0, 0, 0, time.UTC)

// parseInterval reads a heartbeat interval in whole seconds.
func parseInterval(s string) (time.Duration, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("the Interval %q is not a positive number of seconds", s)
	}
	if n > int64(maxInterval/time.Second) {
		return 0, fmt.Errorf("the Interval %s is longer than a year", s)
	}
	d := time.Duration(n) * time.Second
	if d < MinInterval {
		return 0, fmt.Errorf("the Interval %ds is below the minimum of %ds: check rejected", n, int(MinInterval/time.Second))
	}
	return d, nil
}

// checkChannel accepts a Discord channel id (a snowflake: digits).
func checkChannel(s string) error {
	if !channelRE().MatchString(s) {
		return fmt.Errorf("the Channel %q is not a Discord channel id (digits only)", s)
	}
	return nil
}

// checkCron validates a standard five-field cron expression (or a named
// schedule like @daily) with the parser gocron schedules it with.
func checkCron(expr string) error {
	fields := strings.Fields(expr)
	switch {
	case len(fields) == 0:
		return errors.New("the Cron expression is empty")
	case strings.HasPrefix(fields[0], "TZ=") || strings.HasPrefix(fields[0], "CRON_TZ="):
		return fmt.Errorf("the Cron %q sets a time zone: set it with a Timezone line instead", expr)
	case strings.HasPrefix(fields[0], "@"):
		if len(fields) != 1 || !containsFold(cronDescriptors, fields[0]) {
			return fmt.Errorf("the Cron %q is an unknown schedule (use five fields or one of %s)", expr, strings.Join(cronDescriptors, ", "))
		}
	case len(fields) != 5:
		return fmt.Errorf("the Cron %q has %d fields, want 5 (minute hour day-of-month month day-of-week)", expr, len(fields))
	}
	if err := gocron.NewDefaultCron(false).IsValid(expr, time.UTC, cronReference); err != nil {
		return fmt.Errorf("the Cron %q is invalid: %s", expr, strings.ReplaceAll(err.Error(), "\n", ": "))
	}
	return nil
}

// checkTimezone accepts an IANA time zone name such as "Europe/Berlin".
func checkTimezone(name string) error {
	if strings.EqualFold(name, "local") {
		return fmt.Errorf("the Timezone %q is not a zone name: name one such as Europe/Berlin, or leave it out for the default", name)
	}
	if _, err := time.LoadLocation(name); err != nil {
		return fmt.Errorf("the Timezone %q is not a known IANA time zone: %w", name, err)
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}
