package adapters

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
)

// ErrInvalidInvocation is returned (wrapped) by Adapter.Command when the
// invocation cannot be turned into a safe command line; a run that hits it
// should be rejected with error code invalid_request.
var ErrInvalidInvocation = errors.New("invalid invocation")

var (
	// Session ids come from run requests: they must never be read as a flag
	// or carry whitespace. Every CLI's ids (UUIDs, ses_…, thread ids) fit.
	sessionIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	effortPattern    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)
	agentPattern     = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
)

// start validates what every adapter needs and returns a copy of the
// executable argv to append to.
func start(t Type, inv Invocation) ([]string, error) {
	bad := func(format string, a ...any) error { return invalid(t, format, a...) }
	if len(inv.Command) == 0 || inv.Command[0] == "" {
		return nil, bad("the command (executable argv) is empty")
	}
	if inv.MaxTurns < 0 {
		return nil, bad("maxTurns %d is negative", inv.MaxTurns)
	}
	if inv.SessionID != "" && !sessionIDPattern.MatchString(inv.SessionID) {
		return nil, bad("session id %q is not an id (want letters, digits, '.', '_', ':', '-', at most 128, not starting with '-')", inv.SessionID)
	}
	if inv.Effort != "" && !effortPattern.MatchString(inv.Effort) {
		return nil, bad("effort %q is not a level name (want letters, digits, '.', '_', '-')", inv.Effort)
	}
	if len(inv.Model) > 0 && inv.Model[0] == '-' {
		return nil, bad("model %q starts with '-'", inv.Model)
	}
	if len(inv.InstructionsFile) > 0 && inv.InstructionsFile[0] == '-' {
		return nil, bad("instructionsFile %q starts with '-'", inv.InstructionsFile)
	}
	args := make([]string, 0, len(inv.Command)+16+len(inv.ExtraArgs))
	return append(args, inv.Command...), nil
}

// invalid returns an ErrInvalidInvocation error about t.
func invalid(t Type, format string, a ...any) error {
	return fmt.Errorf("%s: %s: %w", t, fmt.Sprintf(format, a...), ErrInvalidInvocation)
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
