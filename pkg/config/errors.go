package config

import (
	"cmp"
	"slices"
	"strings"
)

// Error is one positioned problem in a config file or run request. It
// prints as "path:line:col: field.path: message".
type Error struct {
	// Pos is where the problem is: the offending key or value in the
	// user's file.
	Pos Position
	// Field is the user's field path, e.g. spec.agents[1].adapter; empty
	// when the problem concerns a whole file or document.
	Field string
	// Message says what is wrong, in one line.
	Message string
}

// Error implements error.
func (e *Error) Error() string { return formatLine(e.Pos, e.Field, e.Message) }

// Errors is every problem found in a config directory or a run request,
// sorted by file, line and column. Load and ParseRun return it (as
// *Errors) for invalid input; use errors.As to get at the list.
type Errors struct {
	// List holds the problems, at least one.
	List []*Error
}

// Error joins the problems, one per line.
func (e *Errors) Error() string {
	lines := make([]string, len(e.List))
	for i, x := range e.List {
		lines[i] = x.Error()
	}
	return strings.Join(lines, "\n")
}

// Lines returns each problem formatted as one line.
func (e *Errors) Lines() []string {
	out := make([]string, len(e.List))
	for i, x := range e.List {
		out[i] = x.Error()
	}
	return out
}

// add appends a problem.
func (e *Errors) add(pos Position, field, format string, args ...any) {
	e.List = append(e.List, &Error{Pos: pos, Field: field, Message: sprintf(format, args...)})
}

// err returns e sorted and de-duplicated, or nil when e holds nothing.
func (e *Errors) err() error {
	if e == nil || len(e.List) == 0 {
		return nil
	}
	e.sort()
	return e
}

func (e *Errors) sort() {
	slices.SortStableFunc(e.List, func(a, b *Error) int {
		return cmp.Or(
			comparePos(a.Pos, b.Pos),
			cmp.Compare(a.Field, b.Field),
			cmp.Compare(a.Message, b.Message),
		)
	})
	e.List = slices.CompactFunc(e.List, func(a, b *Error) bool { return *a == *b })
}

func comparePos(a, b Position) int {
	return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
}
