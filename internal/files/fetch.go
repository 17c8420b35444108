package files

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/agentgateway/gateway/internal/queue"
)

// Defaults of a Fetcher.
const (
	DefaultMaxFile  = 25 << 20
	DefaultMaxTotal = 50 << 20
	// InlineLimit is the largest text file whose content goes into the
	// prompt as well as onto disk.
	InlineLimit = 64 << 10
	// MaxImageBlock is the largest image handed to the model as an image
	// (the Anthropic API refuses images over 5 MB once base64-encoded).
	MaxImageBlock = 3_750_000
)

// DiscordCDNs are the origins Discord serves attachments from.
var DiscordCDNs = []string{"https://cdn.discordapp.com", "https://media.discordapp.net"}

// Fetcher downloads the files attached to a prompt. Only URLs on one of
// Origins are fetched, redirects included, and never with credentials:
// an attachment's URL comes from whoever wrote the message.
type Fetcher struct {
	Client *http.Client
	// Origins are the allowed scheme://host[:port] prefixes.
	Origins []string
	// MaxFile and MaxTotal bound one file and all files of a message;
	// either at 0 fetches nothing.
	MaxFile, MaxTotal int64
	// Guard, if set, names the agent: the folders are its, the files
	// are given to it and read back as it could.
	Guard *Guard
}

// NewFetcher returns a Fetcher for Discord's CDNs and, when apiBase is
// set (DISCORD_API_BASE_URL: a proxy, or the fake Discord of the tests),
// its origin too.
func NewFetcher(apiBase string, maxFile, maxTotal int64) *Fetcher {
	origins := append([]string(nil), DiscordCDNs...)
	if u, err := url.Parse(apiBase); err == nil && u.Host != "" {
		origins = append(origins, u.Scheme+"://"+u.Host)
	}
	f := &Fetcher{Origins: origins, MaxFile: maxFile, MaxTotal: maxTotal}
	f.Client = &http.Client{CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		if !f.allowed(req.URL) {
			return errForeignHost
		}
		return nil
	}}
	return f
}

var errForeignHost = errors.New("not on Discord's servers")

// File is one attachment after fetching.
type File struct {
	queue.Attachment
	// Path is where it was saved; empty when it was not.
	Path string
	// MediaType is the type it was saved as (from Discord, else sniffed).
	MediaType string
	// Text is the content of a small text file, for the prompt.
	Text string
	// Problem says, in words for the user, why it was not saved.
	Problem string
	// Data is an image's content (up to MaxImageBlock bytes), read as the
	// agent could once it was saved: what the model is shown, with no
	// second look at a folder the agent may change.
	Data []byte
}

// Image reports whether f is an image a model can look at.
func (f File) Image() bool {
	switch f.MediaType {
	case "image/png", "image/jpeg", "image/gif", "image/webp":
		return f.Path != ""
	}
	return false
}

// Fetch saves the attachments in workDir's .gateway/attachments/<folder>
// (created if needed, the agent's), each under its SafeName; the n-th file
// of one name gets "-n" before its extension. .gateway and the folders
// below it must be real folders of the agent's: a link or another user's
// folder saves nothing. Every file is made relative to those open folders
// and given to the agent. A file already there with the expected size is
// kept (the prompt runs again after a restart); any other file of that
// name is never overwritten. A file that cannot be fetched has its Problem
// set; the others are still fetched.
func (f *Fetcher) Fetch(ctx context.Context, workDir, folder string, list []queue.Attachment) []File {
	out := make([]File, len(list))
	var total int64
	seen := map[string]int{}
	dirfd := -1
	defer func() {
		if dirfd >= 0 {
			unix.Close(dirfd)
		}
	}()
	for i, a := range list {
		out[i] = File{Attachment: a}
		name := SafeName(a.Name)
		seen[name]++
		if n := seen[name]; n > 1 {
			name = numbered(name, n)
		}
		u, err := url.Parse(a.URL)
		switch {
		case f.MaxFile <= 0 || f.MaxTotal <= 0:
			out[i].Problem = "not fetched: this gateway takes no attachments"
			continue
		case err != nil || !f.allowed(u):
			out[i].Problem = "not fetched: its link is not on Discord's servers"
			continue
		case a.Size > f.MaxFile:
			out[i].Problem = fmt.Sprintf("not fetched: %s is over the %s limit per file", byteSize(a.Size), byteSize(f.MaxFile))
			continue
		case total+a.Size > f.MaxTotal:
			out[i].Problem = fmt.Sprintf("not fetched: the files of this message are over the %s limit together", byteSize(f.MaxTotal))
			continue
		}
		if dirfd < 0 {
			if dirfd, err = f.guard().attachments(workDir, folder); err != nil {
				out[i].Problem = "not saved: the gateway could not create a folder for it"
				continue
			}
		}
		saved, size, err := f.save(ctx, dirfd, name, a, f.limit(total))
		if err != nil {
			out[i].Problem = problem(err, f.MaxFile)
			continue
		}
		total += size
		out[i].Path = filepath.Join(workDir, AttachmentsDir, folder, saved)
		out[i].Size = size
		head, text := f.peek(dirfd, saved, size)
		out[i].MediaType = mediaType(a, head)
		if text && textual(out[i].MediaType) {
			out[i].Text = string(head)
		}
		if out[i].Image() && size <= MaxImageBlock {
			out[i].Data, _ = f.guard().readAt(&fence{g: f.guard()}, dirfd, saved, MaxImageBlock)
		}
	}
	return out
}

func (f *Fetcher) guard() *Guard {
	if f.Guard == nil {
		return &Guard{}
	}
	return f.Guard
}

// attachments opens (making what is missing) .gateway/attachments/folder
// in workDir, each folder the agent's and none a link.
func (g *Guard) attachments(workDir, folder string) (int, error) {
	root, err := openDir(workDir)
	if err != nil {
		return -1, WithoutPath(err)
	}
	defer unix.Close(root)
	gw, err := g.folder(root, GatewayDir, true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(gw)
	att, err := g.folder(gw, filepath.Base(AttachmentsDir), true)
	if err != nil {
		return -1, err
	}
	defer unix.Close(att)
	return g.folder(att, SafeName(folder), true)
}

// peek reads, as the agent could, the start of a saved file (for its type)
// or all of it when it is small; text reports whether it is all of it and
// reads as text.
func (f *Fetcher) peek(dirfd int, name string, size int64) (head []byte, text bool) {
	limit := int64(512)
	if size <= InlineLimit {
		limit = size
	}
	g := f.guard()
	file, err := g.open(&fence{g: g}, dirfd, name)
	if err != nil {
		return nil, false
	}
	defer file.Close()
	head, err = io.ReadAll(io.LimitReader(file, limit))
	if err != nil {
		return nil, false
	}
	text = size <= InlineLimit && int64(len(head)) == size && utf8.Valid(head) && !bytes.ContainsRune(head, 0)
	return head, text
}

// limit is how many bytes the next file may have.
func (f *Fetcher) limit(total int64) int64 {
	return min(f.MaxFile, f.MaxTotal-total)
}

func (f *Fetcher) allowed(u *url.URL) bool {
	if u == nil || u.User != nil {
		return false
	}
	origin := strings.ToLower(u.Scheme + "://" + u.Host)
	for _, o := range f.Origins {
		if strings.EqualFold(origin, o) {
			return true
		}
	}
	return false
}

// errTooLarge is a download that went past its limit.
var errTooLarge = errors.New("too large")

// save downloads a into the folder dirfd as name, or a numbered variant
// when another file has that name, and returns the name and size.
func (f *Fetcher) save(ctx context.Context, dirfd int, name string, a queue.Attachment, limit int64) (string, int64, error) {
	for n := 1; n < 100; n++ {
		candidate := name
		if n > 1 {
			candidate = numbered(name, n)
		}
		var st unix.Stat_t
		err := unix.Fstatat(dirfd, candidate, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFREG && a.Size > 0 && st.Size == a.Size {
				return candidate, st.Size, nil // saved by an earlier run of this prompt
			}
			continue
		}
		size, err := f.download(ctx, dirfd, candidate, a.URL, limit)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		return candidate, size, err
	}
	return "", 0, errors.New("too many files of that name")
}

// download fetches url into a temp file in the folder dirfd, gives it to
// the agent and links it to name, which must not exist yet.
func (f *Fetcher) download(ctx context.Context, dirfd int, name, rawURL string, limit int64) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, err
	}
	resp, err := f.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if resp.ContentLength > limit {
		return 0, errTooLarge
	}
	tmp := ".download-" + strconv.FormatUint(rand.Uint64(), 36)
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return 0, err
	}
	defer unix.Unlinkat(dirfd, tmp, 0)
	file := os.NewFile(uintptr(fd), tmp)
	n, err := io.Copy(file, io.LimitReader(resp.Body, limit+1))
	if err == nil {
		if c := f.guard().Agent; c != nil {
			// The agent reads what it was sent.
			err = file.Chown(int(c.UID), int(c.GID))
		}
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, errTooLarge
	}
	// A link, unlike a rename, fails when name exists: nothing is
	// overwritten.
	if err := unix.Linkat(dirfd, tmp, dirfd, name, 0); err != nil {
		return 0, err
	}
	return n, nil
}

// problem says why a download failed, in words for the user; no URL or
// server path.
func problem(err error, maxFile int64) string {
	var uerr *url.Error
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Sprintf("not fetched: it is over the size limit (%s per file)", byteSize(maxFile))
	case errors.Is(err, errForeignHost):
		return "not fetched: its link led off Discord's servers"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "not fetched: the turn ended before the download finished"
	case errors.As(err, &uerr):
		return "not fetched: Discord's file server could not be reached"
	case strings.HasPrefix(err.Error(), "HTTP "):
		return "not fetched: Discord's file server answered " + err.Error()
	}
	return "not saved: the gateway could not write it to disk"
}

// mediaType is the attachment's type as Discord gave it, else guessed
// from its name, else from its first bytes.
func mediaType(a queue.Attachment, head []byte) string {
	if mt, _, err := mime.ParseMediaType(a.ContentType); err == nil && mt != "" && mt != "application/octet-stream" {
		return mt
	}
	if mt := mime.TypeByExtension(strings.ToLower(filepath.Ext(a.Name))); mt != "" {
		mt, _, _ = mime.ParseMediaType(mt)
		return mt
	}
	if len(head) > 512 {
		head = head[:512]
	}
	mt, _, _ := mime.ParseMediaType(http.DetectContentType(head))
	return mt
}

// textual reports whether a media type is text a prompt can carry.
func textual(mt string) bool {
	if strings.HasPrefix(mt, "text/") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/yaml", "application/x-yaml",
		"application/toml", "application/javascript", "application/x-sh", "application/sql":
		return true
	}
	return false
}

// byteSize writes n bytes for people: 812 B, 4.2 KB, 25 MB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KB"
	default:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MB"
	}
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }
