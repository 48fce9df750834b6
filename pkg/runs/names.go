package runs

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// Suffixes of the files pcsync writes beside a request.
const (
	resultSuffix = ".result.json"
	logSuffix    = ".log"
	cancelSuffix = ".cancel"
)

// requestExts are the extensions of request files, in the order a request
// name is resolved.
var requestExts = []string{".json", ".yaml", ".yml"}

// FileKind classifies a file name found in the spool directory.
type FileKind string

// The kinds of spool files.
const (
	// KindRequest is a run request, <name>.json|yaml|yml.
	KindRequest FileKind = "request"
	// KindResult is pcsync's <name>.result.json.
	KindResult FileKind = "result"
	// KindLog is pcsync's <name>.log.
	KindLog FileKind = "log"
	// KindCancel is a user's <name>.cancel.
	KindCancel FileKind = "cancel"
	// KindIgnored is everything else: hidden files, *.tmp, other extensions.
	KindIgnored FileKind = "ignored"
)

// Classify returns the kind of a spool file name (a base name, no
// directory) and the request name it belongs to ("" for ignored files).
func Classify(base string) (FileKind, string) {
	if base == "" || strings.HasPrefix(base, ".") || strings.HasSuffix(base, ".tmp") || strings.ContainsRune(base, filepath.Separator) {
		return KindIgnored, ""
	}
	for _, s := range []struct {
		suffix string
		kind   FileKind
	}{{resultSuffix, KindResult}, {logSuffix, KindLog}, {cancelSuffix, KindCancel}} {
		if strings.HasSuffix(base, s.suffix) {
			name := strings.TrimSuffix(base, s.suffix)
			if name == "" {
				return KindIgnored, ""
			}
			return s.kind, name
		}
	}
	ext := filepath.Ext(base)
	for _, e := range requestExts {
		if ext == e {
			name := strings.TrimSuffix(base, ext)
			if name == "" {
				return KindIgnored, ""
			}
			return KindRequest, name
		}
	}
	return KindIgnored, ""
}

// MaxNameBytes is the longest request name pcsync serves: the longest file
// name it derives from a request name, the temp file of its result
// (".<name>.result.json.<at most 10 digits>.tmp"), must fit in a file name.
const MaxNameBytes = safefile.NameMax - len(".") - len(resultSuffix) - len(".") - 10 - len(".tmp")

// dnsLabel is a DNS-1123 label, the shape of a run id.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// IsDNSLabel reports whether s is a DNS-1123 label (at most 63 lower-case
// letters, digits and '-', starting and ending with a letter or digit).
func IsDNSLabel(s string) bool { return len(s) <= 63 && dnsLabel.MatchString(s) }

// Paths are the files of one request name in a spool directory.
type Paths struct {
	// Spool is the spool directory.
	Spool string
	// Name is the request's base name without extension.
	Name string
}

// Result is <spool>/<name>.result.json.
func (p Paths) Result() string { return filepath.Join(p.Spool, p.Name+resultSuffix) }

// Log is <spool>/<name>.log.
func (p Paths) Log() string { return filepath.Join(p.Spool, p.Name+logSuffix) }

// Cancel is <spool>/<name>.cancel.
func (p Paths) Cancel() string { return filepath.Join(p.Spool, p.Name+cancelSuffix) }

// Requests lists the possible request files of the name.
func (p Paths) Requests() []string {
	out := make([]string, len(requestExts))
	for i, e := range requestExts {
		out[i] = filepath.Join(p.Spool, p.Name+e)
	}
	return out
}
