package schedule

import (
	"testing"
	"time"
)

func TestCronJobNextAfter(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	now := time.Date(2025, time.March, 3, 8, 0, 0, 0, time.UTC) // Monday, 09:00 in Berlin
	got, err := CronJob{Cron: "30 9 * * 1-5", Timezone: "Europe/Berlin"}.NextAfter(now, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2025, time.March, 3, 9, 30, 0, 0, berlin); !got.Equal(want) {
		t.Errorf("next = %v, want %v", got, want)
	}
	if _, err := (CronJob{Cron: "61 * * * *"}).NextAfter(now, time.UTC); err == nil {
		t.Error("an invalid expression gave a next run")
	}
}
