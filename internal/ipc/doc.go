// Package ipc posts proactive messages from files: a JSON file dropped into
// CONFIG_DIR/ipc/outbound/ is posted to the Discord channel it names and
// then removed. Cron scripts, other programs and the agent itself use it to
// post to any allowed channel without talking to Discord.
//
// A file looks like
//
//	{"channel_id": "123456789012345678", "text": "Backup finished", "files": ["reports/backup.log"]}
//
// Writers must write a temp name and rename it into outbound/: the Watcher
// only reads names ending in ".json" and skips names starting with "." or
// ending in ".tmp", so it never sees a half-written file.
//
// Parse is pure: bytes in, a validated Message or a one-line reason out.
//
// A Watcher polls outbound/ (no inotify: polling works on every file system
// and across users) and handles files in name order, at most
// Options.MaxPerScan per scan. A file that can never be posted (malformed,
// too large, not a regular file, a channel that is not allowed, an
// attachment refused) is moved to failed/ with a <name>.reason.txt beside
// it, and is never tried again. A post that fails (Discord is down) leaves
// the file in outbound/ and is retried with a per-file backoff; after
// Options.GiveUpAfter of failures the file goes to failed/ with the last
// error. While a file waits for its retry, later files for the same channel
// wait too, so one channel's messages keep their order.
//
// Whoever may write outbound/ may post to every allowed channel. Under
// AGENT_USER (Options.Agent) that includes the agent: the ipc folder is
// opened to its group for search only and outbound/ for writing (sticky),
// both still the gateway's, and failed/ stays the gateway's alone. The
// gateway trusts no file in outbound/: each is opened without following a
// link (and without blocking on a FIFO), must be a regular file with one
// name (no hard link to a file elsewhere) of at most Options.MaxSize
// bytes, and its content is data, parsed and never run. Before each scan
// the ipc folder, outbound/ and failed/ must be real folders (not links)
// of the gateway's user (outbound/ also the agent's) that no one else may
// change (outbound/: not world-writable); otherwise nothing is read or
// moved, and the reason is logged once.
//
// Delivery is at least once: a crash after a post and before its file is
// removed posts it again on the next start.
//
// A Watcher is safe for concurrent use; scans are serialised. It assumes it
// is the only process that moves files out of outbound/ and into failed/.
package ipc
