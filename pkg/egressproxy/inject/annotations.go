package inject

import (
	"bufio"
	"bytes"
	"crypto/subtle"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// AnnotationTokenPrefix starts the annotation keys of the proxy pod that
// name the live tokens of its tenant: tokens.pcsync.io/<the first 40 hex
// digits of the token's hash>, whose value is the whole hash, then a space
// and the run pod's IP once the daemon knows it. The daemon adds one when
// a run or lease starts and removes it when it ends; the kubelet writes
// the pod's annotations into a downwardAPI file (measured on the real
// node: 0.1–1.05 s after the patch), which AnnotationTokens reads.
const AnnotationTokenPrefix = "tokens.pcsync.io/"

// AnnotationKey is the proxy pod's annotation key of token's hash.
func AnnotationKey(hash string) string { return AnnotationTokenPrefix + hash[:40] }

// AnnotationTokens is a Verifier that reads the live tokens from the proxy
// pod's annotations file (a downwardAPI volume of metadata.annotations).
// A token not there yet is looked for again until Wait passes, since the
// kubelet writes the file a moment after the daemon's patch.
type AnnotationTokens struct {
	Path string
	// Wait bounds the wait for a token not yet in the file. Default 3 s.
	Wait time.Duration

	mu    sync.Mutex
	mtime time.Time
	live  map[string]string // hash → the run pod's IP ("" when not known)
	ended map[string]bool   // hashes that were live and are gone
}

// Verify implements Verifier.
func (a *AnnotationTokens) Verify(token string, from netip.Addr) (run, why string) {
	hash := agentpod.TokenHash(token)
	wait := a.Wait
	if wait <= 0 {
		wait = 3 * time.Second
	}
	for deadline := time.Now().Add(wait); ; time.Sleep(100 * time.Millisecond) {
		ip, live, ended := a.lookup(hash)
		switch {
		case live && (ip == "" || ip == from.String()):
			return hash[:12], ""
		case live:
			return hash[:12], OutcomeBadToken // another pod's token
		case ended:
			return hash[:12], OutcomeRunEnded
		}
		if time.Now().After(deadline) {
			return "", OutcomeBadToken
		}
	}
}

// lookup reads the file again when it changed, and finds hash in it.
func (a *AnnotationTokens) lookup(hash string) (ip string, live, ended bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if st, err := os.Stat(a.Path); err == nil && !st.ModTime().Equal(a.mtime) {
		if raw, err := os.ReadFile(a.Path); err == nil {
			a.load(raw)
			a.mtime = st.ModTime()
		}
	}
	for h, ip := range a.live {
		if subtle.ConstantTimeCompare([]byte(h), []byte(hash)) == 1 {
			return ip, true, false
		}
	}
	return "", false, a.ended[hash]
}

// load replaces the live tokens with raw's (the kubelet's format: one
// key="quoted value" a line), and keeps the ones gone as ended.
func (a *AnnotationTokens) load(raw []byte) {
	live := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if !ok || !strings.HasPrefix(k, AnnotationTokenPrefix) {
			continue
		}
		v, err := strconv.Unquote(v)
		if err != nil {
			continue
		}
		hash, ip, _ := strings.Cut(strings.TrimSpace(v), " ")
		if len(hash) == 64 && k == AnnotationKey(hash) {
			live[hash] = ip
		}
	}
	if a.ended == nil {
		a.ended = map[string]bool{}
	}
	for h := range a.live {
		if _, still := live[h]; !still {
			a.ended[h] = true
		}
	}
	a.live = live
}
