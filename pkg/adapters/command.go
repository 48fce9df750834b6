package adapters

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// ErrInvalidInvocation is returned (wrapped) by Adapter.Check and
// Adapter.Command when the invocation cannot be turned into a safe command
// line; a run that hits it should be rejected with error code
// invalid_request. The error is an *InvocationError, which names the field.
var ErrInvalidInvocation = errors.New("invalid invocation")

// InvocationField names the Invocation field an InvocationError is about.
type InvocationField string

// The fields an invocation can be refused for.
const (
	FieldCommand          InvocationField = "Command"
	FieldMaxTurns         InvocationField = "MaxTurns"
	FieldSessionID        InvocationField = "SessionID"
	FieldEffort           InvocationField = "Effort"
	FieldModel            InvocationField = "Model"
	FieldInstructionsFile InvocationField = "InstructionsFile"
	FieldAgent            InvocationField = "Agent"
)

// InvocationError is an invocation that cannot be turned into a safe
// command line. It wraps ErrInvalidInvocation.
type InvocationError struct {
	// Adapter is the adapter that refused it.
	Adapter Type
	// Field is the field at fault.
	Field InvocationField
	// Reason says what is wrong with it.
	Reason string
}

// Error implements error: "claude_local: session id "-x" is not an id (…):
// invalid invocation".
func (e *InvocationError) Error() string {
	return fmt.Sprintf("%s: %s: %v", e.Adapter, e.Reason, ErrInvalidInvocation)
}

// Unwrap returns ErrInvalidInvocation.
func (e *InvocationError) Unwrap() error { return ErrInvalidInvocation }

var (
	// Session ids come from run requests: they must never be read as a flag
	// or carry whitespace. Every CLI's ids (UUIDs, ses_…, thread ids) fit.
	sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	effortPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)
	agentPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// check validates what every adapter needs.
func check(t Type, inv Invocation) error {
	switch {
	case len(inv.Command) == 0 || inv.Command[0] == "":
		return invalid(t, FieldCommand, "the command (executable argv) is empty")
	case inv.MaxTurns < 0:
		return invalid(t, FieldMaxTurns, "maxTurns %d is negative", inv.MaxTurns)
	case inv.SessionID != "" && !sessionIDPattern.MatchString(inv.SessionID):
		return invalid(t, FieldSessionID, "session id %q is not an id (want letters, digits, '.', '_', ':', '-', at most 128, not starting with '-')", inv.SessionID)
	case inv.Effort != "" && !effortPattern.MatchString(inv.Effort):
		return invalid(t, FieldEffort, "effort %q is not a level name (want letters, digits, '.', '_', '-')", inv.Effort)
	case len(inv.Model) > 0 && inv.Model[0] == '-':
		return invalid(t, FieldModel, "model %q starts with '-'", inv.Model)
	case len(inv.InstructionsFile) > 0 && inv.InstructionsFile[0] == '-':
		return invalid(t, FieldInstructionsFile, "instructionsFile %q starts with '-'", inv.InstructionsFile)
	}
	return nil
}

// start returns a copy of the executable argv to append to; the adapter's
// Command has checked inv.
func start(inv Invocation) []string {
	args := make([]string, 0, len(inv.Command)+16+len(inv.ExtraArgs))
	return append(args, inv.Command...)
}

// invalid returns the *InvocationError of t about field.
func invalid(t Type, field InvocationField, format string, a ...any) error {
	return &InvocationError{Adapter: t, Field: field, Reason: fmt.Sprintf(format, a...)}
}

// instructionsPreamble prefixes the prompt with a pointer to the
// instructions file, for CLIs that have no flag to load one.
func instructionsPreamble(prompt, file string) string {
	if file == "" {
		return prompt
	}
	return "Before you start, read the file " + strconv.Quote(file) +
		" and follow the instructions in it; they apply to this whole task.\n\n" + prompt
}

// unsupported is the warning for an option the CLI has no way to honour.
func unsupported(t Type, option, why string) string {
	return fmt.Sprintf("%s: %s is not supported (%s) and is ignored", t, option, why)
}

// finish assembles a Command from argv and the prompt.
func finish(args []string, stdin string, env map[string]string, inv Invocation, warnings []string) Command {
	return Command{Args: args, Stdin: []byte(stdin), Env: env, Dir: inv.WorkDir, Warnings: warnings}
}
