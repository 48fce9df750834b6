package inject

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
)

// writeAnnotations writes the kubelet's downwardAPI file of annotations
// (key="quoted value" lines), as an atomic replace.
func writeAnnotations(t *testing.T, path string, ann map[string]string) {
	t.Helper()
	var b []byte
	for k, v := range ann {
		b = append(b, fmt.Sprintf("%s=%s\n", k, strconv.Quote(v))...)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	// A new modification time even within the file system's granularity.
	now := time.Now().Add(time.Duration(len(ann)) * time.Millisecond)
	_ = os.Chtimes(path, now, now)
}

func TestAnnotationTokens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "annotations")
	a := &AnnotationTokens{Path: path, Wait: 200 * time.Millisecond}
	hA, hB := agentpod.TokenHash("tok-a"), agentpod.TokenHash("tok-b")
	writeAnnotations(t, path, map[string]string{
		"kubernetes.io/other":          "x",
		AnnotationKey(hA):              hA + " 10.0.0.5",
		AnnotationKey(hB):              hB,
		AnnotationKey(hA[:1] + hB[1:]): "not its key's hash",
	})
	type got struct{ Why string }
	check := func(name, token, from, want string) {
		t.Helper()
		_, why := a.Verify(token, netip.MustParseAddr(from))
		if diff := cmp.Diff(got{want}, got{why}); diff != "" {
			t.Errorf("%s (-want +got)\n%s", name, diff)
		}
	}
	check("bound to its pod", "tok-a", "10.0.0.5", "")
	check("from another pod", "tok-a", "10.0.0.6", OutcomeBadToken)
	check("not bound yet", "tok-b", "10.0.0.9", "")
	check("forged", "tok-x", "10.0.0.5", OutcomeBadToken)

	writeAnnotations(t, path, map[string]string{AnnotationKey(hB): hB})
	check("its run ended", "tok-a", "10.0.0.5", OutcomeRunEnded)
	check("still live", "tok-b", "10.0.0.5", "")

	// A token the daemon adds while the proxy waits for it.
	hC := agentpod.TokenHash("tok-c")
	late := fmt.Sprintf("%s=%s\n%s=%s\n", AnnotationKey(hB), strconv.Quote(hB), AnnotationKey(hC), strconv.Quote(hC))
	go func() {
		time.Sleep(50 * time.Millisecond)
		_ = os.WriteFile(path+".late", []byte(late), 0o644)
		_ = os.Rename(path+".late", path)
	}()
	a.Wait = 5 * time.Second
	check("written a moment late", "tok-c", "10.0.0.7", "")
}
