//go:build !linux

package persona

// changeWatch is inotify's on Linux; elsewhere nothing is watched and
// every file is looked at every time.
type changeWatch struct{}

type version struct{}

func changes() *changeWatch { return nil }

func (*changeWatch) watch(string) (version, bool) { return version{}, false }

func (*changeWatch) watchMissing(string) (version, bool) { return version{}, false }

func (*changeWatch) drain() {}

func (*changeWatch) current(string) version { return version{} }
