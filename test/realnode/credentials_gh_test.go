//go:build integration

package realnode

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pcsync/pcsync/internal/testing/testtool"
	"github.com/pcsync/pcsync/pkg/sandbox"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// ghPath is where the tests put the real gh in an agent's pod: /tmp, an
// emptyDir in a Job's pod and a lease's.
const ghPath = "/tmp/gh"

// ghScript, in an agent's pod, asks GitHub's REST API for acme/$1 and its
// GraphQL API for the viewer with the real gh, as an agent does: no
// option, no token of its own; both answers go to $HOME/gh-out.txt too.
const ghScript = `set -e
cd "${HOME:-/tmp}"
/tmp/gh api "/repos/acme/$1" --jq .full_name > gh-out.txt
/tmp/gh api graphql -f query='query { viewer { login } }' --jq .data.viewer.login >> gh-out.txt
cat gh-out.txt`

// ghPlainScript runs the same REST call with a gh config of its own (no
// socket): gh then goes to https://api.github.com through HTTPS_PROXY.
const ghPlainScript = `mkdir -p /tmp/gh-plain; GH_CONFIG_DIR=/tmp/gh-plain /tmp/gh api /repos/acme/plain 2>&1; echo "exit $?"`

// TestGitHubCLIStaysInTheProxy: on the real node with the enforcer, a run's
// pod of a company with a github credential runs the real GitHub CLI (the
// module's v2.83.0, copied into the pod) unchanged: `gh api /repos/…` and
// `gh api graphql` reach the GitHub stand-in (TLS of the test's CA, in the
// test's network namespace) through pcsync init's socket and the proxy's
// credential route, and the stand-in gets the real token in Bearer on each.
// The control: the same gh with a config of its own fails. The pod holds
// only the run's token (checkGitTokenNowhere: environments, writable
// files, spec, Secret; each beside a control that finds the run's token
// and gh's answer). A lease of the company does the same through its
// command server's socket.
func TestGitHubCLIStaysInTheProxy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	gh, err := testtool.Binary(ctx, repoRoot(t), "gh")
	if err != nil {
		t.Fatal(err)
	}
	e := newGitCredEnv(ctx, t, map[string]string{"README.md": "acme's repository\n"}, nil)
	pod := e.startRun(ctx, t, "gh-1")
	copyGH(ctx, t, e, pod.Name, pod.Spec.Containers[0].Name, gh)
	marker := "gh-answer-" + randomHex(8)
	if out := e.untilOK(ctx, t, pod, ghScript, marker); strings.TrimSpace(out) != "acme/"+marker+"\noctocat" {
		t.Fatalf("gh in the run's pod: %q, want acme/%s and octocat", out, marker)
	}
	checkGHRequests(t, e, 0, marker)
	n := len(e.server.api.Requests())
	out, err := e.sh(ctx, pod, ghPlainScript)
	if err != nil || strings.HasSuffix(strings.TrimSpace(out), "exit 0") {
		t.Errorf("the control: gh without pcsync's socket succeeded (%v):\n%s", err, out)
	}
	t.Logf("gh without pcsync's socket: %s", strings.TrimSpace(out))
	if got := e.server.api.Requests()[n:]; len(got) != 0 {
		t.Errorf("gh without pcsync's socket reached the stand-in: %q", got)
	}
	checkGitTokenNowhere(ctx, t, e, pod, runToken(ctx, t, e, pod), marker)
	checkLeaseGH(ctx, t, e, gh)
}

// checkGHRequests: the stand-in's API got, from request from on, gh's two
// requests (and those of earlier tries) with the real token in Bearer,
// and nothing else.
func checkGHRequests(t *testing.T, e *gitCredEnv, from int, marker string) {
	t.Helper()
	bearer := " Bearer " + gitToken
	var rest, graphql int
	for _, r := range e.server.api.Requests()[from:] {
		switch r {
		case "GET api.github.com /repos/acme/" + marker + bearer:
			rest++
		case "POST api.github.com /graphql" + bearer:
			graphql++
		default:
			t.Errorf("the stand-in's API got %.60q…; want gh's two requests with the real token", r)
		}
	}
	if rest == 0 || graphql == 0 {
		t.Errorf("the stand-in's API got %d REST and %d GraphQL requests of gh with the real token, want each", rest, graphql)
	}
}

// copyGH copies the gh binary at path into a pod's container, at ghPath.
func copyGH(ctx context.Context, t *testing.T, e *gitCredEnv, pod, container, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, stderr, err := podExecIn(ctx, e.c, e.ns, pod, container, f, []string{"sh", "-c", "cat > " + ghPath + " && chmod 755 " + ghPath}); err != nil {
		t.Fatalf("copy gh into %s: %v\n%s", pod, err, stderr)
	}
}

// checkLeaseGH: a lease of the company (pcsync's sandbox Manager, as the
// daemon runs it), whose execute's env carries no key, runs the same gh
// calls: its command server serves the socket from the execute's env, the
// stand-in gets the real token; the execute's env holds the lease's token
// in GH_TOKEN, and no process of the pod the real one.
func checkLeaseGH(ctx context.Context, t *testing.T, e *gitCredEnv, gh string) {
	t.Helper()
	m, info := firewalledLease(ctx, t, e.c, e.model, e.addrs, e.ns, e.slug, "gh-lease")
	copyGH(ctx, t, e, info.ID, leasepod.ContainerName, gh)
	marker := "gh-lease-" + randomHex(8)
	n := len(e.server.api.Requests())
	var out string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		r, err := m.Execute(ctx, sandbox.ExecParams{LeaseID: info.ID, Command: "sh", Args: []string{"-c", ghScript + `
env | grep -c '^GH_TOKEN=pcsync-run-'
node -e "$2" "$3"
node -e "$2" "$(node -e 'process.stdout.write(require("crypto").createHash("sha256").update(process.env.GH_TOKEN).digest("hex"))')"`,
			"sh", marker, environScanScript, sha(gitToken)}, Timeout: time.Minute}, nil)
		if err != nil {
			t.Fatalf("execute in lease %s: %v", info.ID, err)
		}
		if out = r.Stdout + r.Stderr; r.ExitCode != nil && *r.ExitCode == 0 {
			break
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || strings.Join(lines[:3], "\n") != "acme/"+marker+"\noctocat\n1" {
		t.Fatalf("gh in the lease (its answers, GH_TOKEN the lease's token): %q", out)
	}
	// The real token in no process's environment of the lease's pod; the
	// lease's own (the control) found.
	t.Logf("the lease pod's environments: real token %s; the lease's token %s", lines[3], lines[4])
	if real, own := lines[3], lines[4]; !strings.HasSuffix(real, " hits 0") || strings.HasPrefix(real, "procs 0") || strings.HasSuffix(own, " hits 0") {
		t.Errorf("the lease pod's environments: the real token %q, the lease's token %q; want the real one in none, the lease's found", real, own)
	}
	checkGHRequests(t, e, n, marker)
}
