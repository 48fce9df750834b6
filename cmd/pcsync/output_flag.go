package main

import (
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// -o/--output is an output format in every command, as in kubectl; a
// command that writes files names them with a flag of their own (render
// --output-dir, schema --output-file). The formats of each command, the
// default first:
var (
	// textFormats: apply, diff.
	textFormats = []string{"text", "json"}
	// tableFormats: runs, doctor.
	tableFormats = []string{"table", "json"}
	// manifestFormats: render.
	manifestFormats = []string{"yaml", "json"}
	// schemaFormats: schema.
	schemaFormats = []string{"json"}
)

// valuesAnnotation marks a flag whose values are a fixed list: the shell
// completion offers them (completion.go).
const valuesAnnotation = "pcsync_values"

// addOutputFlag adds -o/--output to fs, whose value is one of formats (the
// first the default); checkOutput checks it.
func addOutputFlag(fs *pflag.FlagSet, p *string, formats []string) {
	fs.StringVarP(p, "output", "o", formats[0], "output format: "+orList(formats))
	setFlagValues(fs, "output", formats...)
}

// checkOutput refuses an output format that is not one of formats.
func checkOutput(format string, formats []string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	return usageErrorf("--output %q: want %s", format, orList(formats))
}

// checkOutputMoved is checkOutput for a command whose -o named a path before
// it meant a format (render -o DIR, schema -o FILE): the error names the
// flag that takes the path now.
func checkOutputMoved(format string, formats []string, pathFlag string) error {
	if slices.Contains(formats, format) {
		return nil
	}
	return usageErrorf("--output %q: want %s (-o is an output format, as in kubectl); to write to %s: %s %s",
		format, orList(formats), format, pathFlag, format)
}

// setFlagValues records the values of fs's flag name for completion.
func setFlagValues(fs *pflag.FlagSet, name string, values ...string) {
	_ = fs.SetAnnotation(name, valuesAnnotation, values)
}

// orList joins words as "a", "a or b", "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
