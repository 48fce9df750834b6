package spool

import (
	"fmt"
	"os"
	"slices"

	"github.com/pcsync/pcsync/pkg/runs"
)

// spoolSnapshot is what one listing of the spool directory found, by
// request name.
type spoolSnapshot struct {
	// requests maps a name to its request files (base names, sorted);
	// more than one is a conflict.
	requests map[string][]string
	// results and cancels are the names with a result or cancel file.
	results map[string]bool
	cancels map[string]bool
}

// scanSpool lists the spool directory. It reads no file.
func scanSpool(dir string) (spoolSnapshot, error) {
	s := spoolSnapshot{requests: map[string][]string{}, results: map[string]bool{}, cancels: map[string]bool{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return s, fmt.Errorf("spool %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		kind, name := runs.Classify(e.Name())
		switch kind {
		case runs.KindRequest:
			s.requests[name] = append(s.requests[name], e.Name())
		case runs.KindResult:
			s.results[name] = true
		case runs.KindCancel:
			s.cancels[name] = true
		}
	}
	for _, files := range s.requests {
		slices.Sort(files)
	}
	return s, nil
}

// nameProblem says why pcsync cannot serve a request name, or "".
func nameProblem(name string) string {
	if len(name) > runs.MaxNameBytes {
		return fmt.Sprintf("the request name is too long (%d bytes; at most %d, so that the files pcsync writes beside it fit in a file name); rename the request", len(name), runs.MaxNameBytes)
	}
	return ""
}
