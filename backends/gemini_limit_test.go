package backends

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// gemini 0.61.0 over a daily quota (testdata/gemini/limits) fails at once
// with no time in its stream: a rate limit without a reset, which the
// gateway does not wait for.
func TestGeminiParseDailyQuotaHasNoReset(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "testdata", "gemini", "limits", "daily_quota.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var p GeminiParser
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if _, err := p.Parse(sc.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.Result()
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindRateLimit {
		t.Fatalf("err = %v, want a rate limit", err)
	}
	if at, ok := ResetOf(err); ok {
		t.Errorf("reset %v from a stream that gives none", at)
	}
}
