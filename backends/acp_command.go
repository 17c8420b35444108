package backends

import (
	"errors"
	"strings"
)

// SplitCommand splits a command line into words as a POSIX shell would
// for plain words, single and double quotes and backslashes, without
// running a shell: no variables, globs, pipes or redirections.
func SplitCommand(line string) ([]string, error) {
	var (
		words   []string
		cur     strings.Builder
		inWord  bool
		quote   rune // 0, '\'' or '"'
		escaped bool
	)
	for _, r := range line {
		switch {
		case escaped:
			if quote == '"' && r != '"' && r != '\\' && r != '$' && r != '`' {
				cur.WriteRune('\\')
			}
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\' && quote != '\'':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if escaped {
		return nil, errors.New("the command ends with a lone backslash")
	}
	if quote != 0 {
		return nil, errors.New("the command has an unclosed quote")
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
