package spend

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// AnnotationAgentPrefix starts the proxy pod's annotation keys that name
// each live run's agent: agents.pcsync.io/<the first 40 hex digits of the
// run's token hash> = the agent's name. The daemon writes them beside the
// tokens' (package tokensync).
const AnnotationAgentPrefix = "agents.pcsync.io/"

// RunOf is the run of a token hash's annotation key suffix, as
// inject.Verifier names it: the hash's first 12 hex digits.
func RunOf(hash string) string { return hash[:min(12, len(hash))] }

// AnnotationBase is the proxy pod's annotation that holds what the
// month's other proxy processes counted (a Totals' JSON): where this one
// starts from. The daemon writes it from the Record it keeps.
const AnnotationBase = "spend.pcsync.io/base"

// annotationAgents reads which run is which agent's from the proxy pod's
// annotations file, again when it changed, and hands the base
// annotation's value to onBase.
type annotationAgents struct {
	path   string
	onBase func(raw string)

	mu     sync.Mutex
	mtime  time.Time
	agents map[string]string // run → agent
}

// agent returns run's agent ("" when the file does not name it).
func (a *annotationAgents) agent(run string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, err := os.Stat(a.path); err == nil && !st.ModTime().Equal(a.mtime) {
		if raw, err := os.ReadFile(a.path); err == nil {
			var base string
			a.agents, base = parseAgents(raw)
			a.mtime = st.ModTime()
			if base != "" && a.onBase != nil {
				a.onBase(base)
			}
		}
	}
	return a.agents[run]
}

// parseAgents reads the kubelet's annotations format (one key="quoted
// value" a line): the runs' agents, and the base annotation's value.
func parseAgents(raw []byte) (agents map[string]string, base string) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok && k == AnnotationBase {
			base, _ = strconv.Unquote(v)
		}
		if !ok || !strings.HasPrefix(k, AnnotationAgentPrefix) {
			continue
		}
		if v, err := strconv.Unquote(v); err == nil {
			out[RunOf(strings.TrimPrefix(k, AnnotationAgentPrefix))] = v
		}
	}
	return out, base
}
