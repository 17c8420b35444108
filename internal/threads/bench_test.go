package threads

import (
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkAddToALongList is the cost of opening a thread when the list
// already holds n threads: each Add rewrites threads.json.
func BenchmarkAddToALongList(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s, _, err := Open(filepath.Join(b.TempDir(), FileName))
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			for i := range n {
				s.threads[strconv.Itoa(i)] = Thread{ID: strconv.Itoa(i), Parent: "1", Guild: "2", Author: "3", Name: "a task of some length", Created: now}
			}
			b.ResetTimer()
			for i := range b.N {
				if _, err := s.Add(Thread{ID: "new" + strconv.Itoa(i), Parent: "1", Created: now}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
