package config

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrEnvNotSet is wrapped by the *Error reported for a ${VAR} reference whose
// variable is not set and that has no default.
var ErrEnvNotSet = errors.New("environment variable is not set")

// Error is one problem in a configuration file. Load, Parse and Validate
// report problems as an ErrorList of *Error values (all of them, sorted by
// line); errors.As finds either. Messages never contain secret values.
type Error struct {
	// File is the file name as it was given to Load or Parse.
	File string
	// Line is the 1-based line of the offending key or value; 0 if unknown
	// (for example a required key that is missing altogether).
	Line int
	// Path is the key path, such as "plugins[0].settings.api_key"; empty for
	// problems with the file as a whole.
	Path string
	// Msg says what is wrong.
	Msg string
	// Err is an optional underlying cause (for example ErrEnvNotSet).
	Err error
}

// Error formats the problem as "file:line: path: message".
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// ErrorList holds every problem found in one configuration, sorted by line.
// errors.As finds the individual *Error values through Unwrap.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap exposes the individual errors to errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// sortErrors orders errors by line, then path, then message. Errors without a
// line (missing keys) come last.
func sortErrors(l ErrorList) {
	slices.SortStableFunc(l, func(a, b *Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Msg, b.Msg))
	})
}

// MaxErrors is how many problems one ErrorList from Load, Parse or Validate
// holds at most. A file with more (a generated file gone wrong, an
// attacker's) gets the first MaxErrors by line and a last entry saying how
// many more there are, so a report stays readable and cheap to print, log
// or send.
const MaxErrors = 50

// asError returns nil for an empty list and the sorted list otherwise,
// capped at MaxErrors problems plus a summary of the rest.
func (l ErrorList) asError() error {
	if len(l) == 0 {
		return nil
	}
	sortErrors(l)
	if len(l) > MaxErrors {
		more := len(l) - MaxErrors
		l = append(l[:MaxErrors:MaxErrors], &Error{
			File: l[0].File,
			Msg:  fmt.Sprintf("and %d more %s (fix the ones above first)", more, plural(more, "problem", "problems")),
		})
	}
	return l
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
