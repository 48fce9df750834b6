//go:build integration

package realnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// podExec runs command in a pod's container through the API server's exec and
// returns its stdout; a non-zero exit is an error carrying stderr.
func podExec(ctx context.Context, c *testcluster.Cluster, ns, pod, container string, command []string) (string, error) {
	req := c.Client().CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true},
			scheme.ParameterCodec)
	ex, err := remotecommand.NewWebSocketExecutor(c.RESTConfig(), "GET", req.URL().String())
	if err != nil {
		return "", fmt.Errorf("exec in %s/%s: %w", ns, pod, err)
	}
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	var exitErr utilexec.ExitError
	if errors.As(err, &exitErr) {
		return stdout.String(), fmt.Errorf("exec %q in %s/%s: exit %d: %s", command, ns, pod, exitErr.ExitStatus(), stderr.String())
	}
	if err != nil {
		return stdout.String(), fmt.Errorf("exec %q in %s/%s: %w (stderr %q)", command, ns, pod, err, stderr.String())
	}
	return stdout.String(), nil
}

// pauseDial is the probe command of a container from the real node's pause image:
// one `dial NET HOST:PORT: OUTCOME` line per spec (internal/testing/testcluster/pause).
func pauseDial(specs ...string) []string {
	cmd := []string{"/pause", "-timeout", "2s"}
	for _, s := range specs {
		cmd = append(cmd, "-dial", s)
	}
	return append(cmd, "-exit", "0")
}

// nodeDialScript is the same probe for pcsync's images, which have Node.js and no
// /pause: `node -e nodeDialScript SPEC...` prints the same lines. A TCP dial is "ok"
// once connected, with the first line the peer sends within half a second.
const nodeDialScript = `
const net = require('net'), dgram = require('dgram');
const T = 2000;
const cls = e => { const c = e && e.code;
  return c === 'ECONNREFUSED' ? 'refused' : (c === 'EHOSTUNREACH' || c === 'ENETUNREACH') ? 'unreachable' :
    c === 'ETIMEDOUT' ? 'timeout' : 'error: ' + (c || e); };
function one(spec) {
  const [p, h, port] = spec.split(':');
  return new Promise(res => {
    let done = false; const fin = r => { if (!done) { done = true; res(r); } };
    if (p === 'tcp') {
      const s = net.connect({host: h, port: +port});
      let buf = '', conn = false;
      const t = setTimeout(() => { s.destroy(); fin(conn ? 'ok' : 'timeout'); }, T);
      s.on('connect', () => { conn = true; setTimeout(() => { s.destroy(); fin(buf ? 'ok ' + buf.split('\n')[0].trim() : 'ok'); }, 500); });
      s.on('data', d => { buf += d; if (buf.includes('\n')) { clearTimeout(t); s.destroy(); fin('ok ' + buf.split('\n')[0].trim()); } });
      s.on('end', () => { clearTimeout(t); fin(buf ? 'ok ' + buf.split('\n')[0].trim() : 'ok'); });
      s.on('error', e => { clearTimeout(t); fin(cls(e)); });
    } else {
      const s = dgram.createSocket('udp4');
      const t = setTimeout(() => { s.close(); fin('timeout'); }, T);
      s.on('error', e => { clearTimeout(t); try { s.close(); } catch (_) {} fin(cls(e)); });
      s.on('message', m => { clearTimeout(t); s.close(); fin('ok ' + m.toString().trim()); });
      s.connect(+port, h, e => { if (e) { clearTimeout(t); fin(cls(e)); return; } s.send('probe\n'); });
    }
  });
}
(async () => { for (const s of process.argv.slice(1)) {
  const i = s.indexOf(':'); console.log('dial ' + s.slice(0, i) + ' ' + s.slice(i + 1) + ': ' + await one(s)); } })();
`

// nodeDial is the probe command for a container of pcsync's images.
func nodeDial(specs ...string) []string {
	return append([]string{"node", "-e", nodeDialScript}, specs...)
}

// parseDials maps each spec ("tcp:HOST:PORT") to its outcome ("ok BANNER",
// "refused", …) from the probe's output.
func parseDials(t testing.TB, out string, specs []string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		rest, ok := strings.CutPrefix(line, "dial ")
		if !ok {
			continue
		}
		head, outcome, ok := strings.Cut(rest, ": ")
		if !ok {
			continue
		}
		network, addr, _ := strings.Cut(head, " ")
		got[network+":"+addr] = outcome
	}
	for _, s := range specs {
		if _, ok := got[s]; !ok {
			t.Fatalf("the probe printed no outcome for %s; its output:\n%s", s, out)
		}
	}
	return got
}
