// Package schedule turns heartbeat.md and agents.md into timed events.
//
// The parsers (ParseHeartbeats, ParseAgents) are pure: text in, items and
// Problems out, no I/O. They parse every item that is valid and report every
// one that is not with its file and line, so one typo never disables the rest
// of a file. Examples kept inside HTML comments or fenced code blocks are
// never parsed as configuration.
//
// A Scheduler runs the parsed heartbeats and cron jobs on gocron and hands
// each firing to an enqueue function as a queue.Event. Apply and Reload
// change the running schedule in place: only items that were added, removed
// or changed are rescheduled; a paused cron job is kept but never timed.
// Trigger runs a cron job once, now. A heartbeat or cron job never overlaps
// itself: while the event it last enqueued (by timer or Trigger) has not
// been reported Done, its ticks are skipped and Trigger refuses.
// A Scheduler is safe for concurrent use.
//
// The editors (AddCronJob, UpdateCronJob, DeleteCronJob) are pure too: they
// change one cron job in agents.md's text and leave every other byte as it
// was.
package schedule
