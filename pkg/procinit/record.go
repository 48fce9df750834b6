package procinit

import (
	"encoding/json"
	"strings"
	"time"
)

// recordPrefix starts a Record in a termination message, so that a message
// the command wrote itself is never taken for one.
const recordPrefix = "pcsync-init "

// Record is what Run writes to the termination-message file when the
// command ends.
type Record struct {
	// StartedAt is when Run started the command.
	StartedAt time.Time `json:"startedAt"`
	// FinishedAt is when Run reaped the command.
	FinishedAt time.Time `json:"finishedAt"`
	// ExitCode is the status Run exits with: the command's exit code, or
	// 128+n when signal n ended it.
	ExitCode int `json:"exitCode"`
	// Signal is the signal that ended the command (for example
	// "SIGTERM"), or "".
	Signal string `json:"signal,omitempty"`
}

// Duration is the command's run time.
func (r Record) Duration() time.Duration { return r.FinishedAt.Sub(r.StartedAt) }

// String renders r as Run writes it: one line, recordPrefix then JSON.
func (r Record) String() string {
	r.StartedAt, r.FinishedAt = r.StartedAt.UTC(), r.FinishedAt.UTC()
	b, _ := json.Marshal(r) // a struct of times, ints and a string
	return recordPrefix + string(b)
}

// ParseRecord reads a termination message. It returns the Record, if the
// message is one that Run wrote, and the rest of the message (text the
// command wrote to the same file before Run appended its Record).
func ParseRecord(msg string) (rec Record, rest string, ok bool) {
	i := strings.LastIndex(msg, recordPrefix)
	if i < 0 || (i > 0 && msg[i-1] != '\n') {
		return Record{}, msg, false
	}
	line := strings.TrimSpace(msg[i+len(recordPrefix):])
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.StartedAt.IsZero() || rec.FinishedAt.IsZero() {
		return Record{}, msg, false
	}
	return rec, strings.TrimRight(msg[:i], "\n"), true
}
