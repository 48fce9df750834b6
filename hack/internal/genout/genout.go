// Package genout is the command line of pcsync's one-file generators
// (hack/gendocs, hack/genadapters, hack/gensandbox): -o names the output
// file, "-" prints it instead.
package genout

import (
	"flag"
	"fmt"
	"os"
)

// Main parses -o (default def) and writes what generate returns there, or
// to stdout for "-"; a failure exits 1 with the tool's name.
func Main(tool, def string, generate func() ([]byte, error)) {
	out := flag.String("o", def, "output file, - for stdout")
	flag.Parse()
	b, err := generate()
	if err == nil && *out == "-" {
		_, err = os.Stdout.Write(b)
	} else if err == nil {
		err = os.WriteFile(*out, b, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", tool, err)
		os.Exit(1)
	}
}
