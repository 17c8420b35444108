package config

import (
	"fmt"
	"strings"
)

// ValidationError lists every problem Load found, so that an operator can
// fix them all in one go. Each problem is a *VarError.
type ValidationError struct {
	Problems []error
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return "invalid configuration: " + e.Problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problems; set these in the environment or .env):", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, for errors.Is and errors.As.
func (e *ValidationError) Unwrap() []error { return e.Problems }

// VarError is one problem with one variable.
type VarError struct {
	// Var is the variable's name, e.g. QUERY_TIMEOUT_MS.
	Var string
	// Msg says what is wrong and how to fix it. It names Var and never
	// holds a secret's value.
	Msg string
}

func (e *VarError) Error() string { return e.Msg }

func varErrorf(name, format string, args ...any) *VarError {
	return &VarError{Var: name, Msg: fmt.Sprintf(format, args...)}
}

// quote shows a (non-secret) value in a message: quoted, and cut short when
// long so that one bad value cannot flood the output.
func quote(s string) string {
	const max = 48
	if r := []rune(s); len(r) > max {
		s = string(r[:max-8]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
