//go:build integration

package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/internal/testing/paperclipserver"
	"github.com/pcsync/pcsync/internal/testing/testcluster"
)

// paperclipPublicURL is PAPERCLIP_PUBLIC_URL in deploy/paperclip.
const paperclipPublicURL = "http://paperclip-server.paperclip.svc:3100"

// paperclipBoard is the Paperclip server of deploy/paperclip's pod as its
// first admin uses it in authenticated mode: under the public URL (dialled
// at the pod's IP, as the Service would route it), with a board API key.
type paperclipBoard struct {
	hc  *http.Client
	key string
	// open are the issues assign made that done has not closed.
	open []string
}

// newPaperclipBoard makes the instance's first admin the way Paperclip's
// docs have an operator do it: a bootstrap invite from `paperclipai auth
// bootstrap-ceo` run in the Paperclip container, a sign-up, the invite
// accepted, then a board API key for what follows.
func newPaperclipBoard(ctx context.Context, t *testing.T, c *testcluster.Cluster, pod corev1.Pod) *paperclipBoard {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &paperclipBoard{}
	b.at(pod)
	b.hc.Jar = jar
	// The CLI reads the instance's config file, which the server in the
	// published image runs without (its environment says it all): the
	// operator hands it one that says the same.
	cfg, err := json.Marshal(bootstrapConfig())
	if err != nil {
		t.Fatal(err)
	}
	const cfgPath = "/tmp/paperclip-bootstrap-config.json"
	if _, stderr, err := podExecIn(ctx, c, paperclipNamespace, pod.Name, "paperclip", bytes.NewReader(cfg), []string{"sh", "-c", "cat > " + cfgPath}); err != nil {
		t.Fatalf("write %s: %v %s", cfgPath, err, stderr)
	}
	out, err := podExec(ctx, c, paperclipNamespace, pod.Name, "paperclip",
		[]string{"/app/node_modules/.bin/paperclipai", "auth", "bootstrap-ceo", "--config", cfgPath, "--base-url", paperclipPublicURL})
	if err != nil {
		t.Fatalf("paperclipai auth bootstrap-ceo: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`/invite/(pcp_bootstrap_[0-9a-f]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("paperclipai auth bootstrap-ceo printed no invite URL:\n%s", out)
	}
	b.must(ctx, t, "POST", "/api/auth/sign-up/email", map[string]any{"email": "admin@example.com", "password": "pcsync-" + randomSuffix(t) + "-secret", "name": "Admin"}, nil)
	b.must(ctx, t, "POST", "/api/invites/"+m[1]+"/accept", map[string]any{"requestType": "human"}, nil)
	var key struct {
		Token string `json:"token"`
	}
	b.must(ctx, t, "POST", "/api/board-api-keys", map[string]any{"name": "pcsync realnode test"}, &key)
	if key.Token == "" {
		t.Fatal("POST /api/board-api-keys returned no token")
	}
	b.key = key.Token
	b.hc.Jar = nil
	return b
}

// at points the board at pod, the one the Service routes to.
func (b *paperclipBoard) at(pod corev1.Pod) {
	podAddr := net.JoinHostPort(pod.Status.PodIP, "3100")
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	b.hc = &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, network, podAddr)
		},
	}}
}

// bootstrapConfig is a Paperclip config file that says what deploy/paperclip's
// environment says: authenticated mode, the data directory /paperclip and
// embedded Postgres on its default port.
func bootstrapConfig() map[string]any {
	inst := "/paperclip/instances/default"
	return map[string]any{
		"$meta": map[string]any{"version": 1, "updatedAt": time.Now().UTC().Format(time.RFC3339), "source": "onboard"},
		"database": map[string]any{"mode": "embedded-postgres", "embeddedPostgresDataDir": inst + "/db", "embeddedPostgresPort": 54329,
			"backup": map[string]any{"enabled": false, "intervalMinutes": 60, "retentionDays": 7, "dir": inst + "/data/backups"}},
		"logging": map[string]any{"mode": "file", "logDir": inst + "/logs"},
		"server": map[string]any{"deploymentMode": "authenticated", "exposure": "private", "bind": "lan",
			"host": "0.0.0.0", "port": 3100, "allowedHostnames": []any{}, "serveUi": true},
		"telemetry": map[string]any{"enabled": false},
		"updates":   map[string]any{"checkEnabled": false},
		"auth":      map[string]any{"baseUrlMode": "explicit", "publicBaseUrl": paperclipPublicURL, "disableSignUp": false},
		"storage": map[string]any{"provider": "local_disk", "localDisk": map[string]any{"baseDir": inst + "/data/storage"},
			"s3": map[string]any{"bucket": "paperclip", "region": "us-east-1", "prefix": "", "forcePathStyle": false}},
		"secrets": map[string]any{"provider": "local_encrypted", "strictMode": false,
			"localEncrypted": map[string]any{"keyFilePath": inst + "/secrets/master.key"}},
	}
}

// do sends one request under the public URL, as JSON
// (paperclipserver.Do), with the board's key once it has one.
func (b *paperclipBoard) do(ctx context.Context, method, path string, in, out any) error {
	u, _ := url.Parse(paperclipPublicURL)
	h := http.Header{"Origin": {u.Scheme + "://" + u.Host}}
	if b.key != "" {
		h.Set("Authorization", "Bearer "+b.key)
	}
	return paperclipserver.Do(ctx, b.hc, method, paperclipPublicURL+path, h, in, out)
}

// must is do for tests: any error is fatal.
func (b *paperclipBoard) must(ctx context.Context, t *testing.T, method, path string, in, out any) {
	t.Helper()
	if err := b.do(ctx, method, path, in, out); err != nil {
		t.Fatal(err)
	}
}

// paperclipRun is what a heartbeat run's page shows.
type paperclipRun struct {
	ID              string         `json:"id"`
	Status          string         `json:"status"`
	Error           *string        `json:"error"`
	ErrorCode       *string        `json:"errorCode"`
	UsageJSON       map[string]any `json:"usageJson"`
	ContextSnapshot map[string]any `json:"contextSnapshot"`
}

// cents is the run's cost as Paperclip books it, in cents.
func (r paperclipRun) cents() float64 {
	cost, _ := r.UsageJSON["costUsd"].(float64)
	return math.Round(cost * 100)
}

// waitRun polls a run until it is over (Paperclip has no watch for
// runs): neither queued nor running (succeeded, failed, cancelled,
// timed_out, or interrupted by a server's shutdown).
func (b *paperclipBoard) waitRun(ctx context.Context, t *testing.T, id string) paperclipRun {
	t.Helper()
	for {
		var r paperclipRun
		b.must(ctx, t, "GET", "/api/heartbeat-runs/"+id, nil, &r)
		if r.Status != "" && r.Status != "queued" && r.Status != "running" {
			return r
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %s still %s: %v", id, r.Status, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runLog returns the run's log as Paperclip stored it (every chunk, in
// order).
func (b *paperclipBoard) runLog(ctx context.Context, t *testing.T, id string) string {
	t.Helper()
	var page struct {
		Content string `json:"content"`
	}
	b.must(ctx, t, "GET", "/api/heartbeat-runs/"+id+"/log?limitBytes=1048576", nil, &page)
	var sb strings.Builder
	for _, line := range strings.Split(page.Content, "\n") {
		var e struct {
			Chunk string `json:"chunk"`
		}
		if json.Unmarshal([]byte(line), &e) == nil {
			sb.WriteString(e.Chunk)
		}
	}
	return sb.String()
}

// paperclipAgent is a Paperclip company and its agent of adapter type
// pcsync.
type paperclipAgent struct {
	company, agent string
}

// checkPcsyncWake is what a Paperclip user of deploy/paperclip does with a
// pcsync agent: a Paperclip company and an agent of adapter type pcsync
// (company acme, agent coder of the config in Git), an issue assigned to
// it, which wakes it. The run becomes a Job on the real node in tenant,
// and its transcript, tokens and cost reach the run's page and the
// company's costs.
func checkPcsyncWake(ctx context.Context, t *testing.T, c *testcluster.Cluster, b *paperclipBoard, tenant string) paperclipAgent {
	t.Helper()
	var company, agent struct {
		ID string `json:"id"`
	}
	b.must(ctx, t, "POST", "/api/companies", map[string]any{"name": "Acme"}, &company)
	b.must(ctx, t, "POST", "/api/companies/"+company.ID+"/agents", map[string]any{"name": "Coder", "adapterType": "pcsync",
		"adapterConfig": map[string]any{"spoolDir": "/spool", "company": "acme", "agent": "coder"}}, &agent)
	a := paperclipAgent{company.ID, agent.ID}
	woken := time.Now()
	r := b.waitRun(ctx, t, b.assign(ctx, t, a, "please succeed"))
	t.Logf("issue assigned → run %s %s on Paperclip's page in %s", r.ID, r.Status, time.Since(woken).Round(time.Millisecond))
	if r.Status != "succeeded" {
		t.Fatalf("run %s: %s (%s: %s), want succeeded\n%s", r.ID, r.Status, deref(r.ErrorCode), deref(r.Error), podsReport(c, tenant))
	}
	if out, _ := r.UsageJSON["outputTokens"].(float64); out != 8 {
		t.Errorf("run %s: usage %v, want the stand-in transcript's 8 output tokens", r.ID, r.UsageJSON)
	}
	if cost, _ := r.UsageJSON["costUsd"].(float64); cost != 0.0123 {
		t.Errorf("run %s: usage %v, want the stand-in transcript's cost 0.0123", r.ID, r.UsageJSON)
	}
	if log := b.runLog(ctx, t, r.ID); !strings.Contains(log, "The README says hello.") {
		t.Errorf("run %s: its transcript on Paperclip's page has no %q:\n%.2000s", r.ID, "The README says hello.", log)
	}
	b.checkSpend(ctx, t, a, 0, "each run's cost once")
	if jobs := runJobs(ctx, t, c, tenant, r.ID); len(jobs) != 1 {
		t.Errorf("tenant %s: Jobs of run %s %v, want one", tenant, r.ID, jobs)
	}
	b.done(ctx, t)
	return a
}

// assign creates an issue whose description is prompt, assigned to a's
// agent (which wakes it), and returns the id of the run it woke (the run
// whose context names the issue: Paperclip may start other runs of the
// agent by itself).
func (b *paperclipBoard) assign(ctx context.Context, t *testing.T, a paperclipAgent, prompt string) string {
	t.Helper()
	var issue struct {
		ID string `json:"id"`
	}
	b.must(ctx, t, "POST", "/api/companies/"+a.company+"/issues", map[string]any{"title": "Say hello",
		"description": prompt, "assigneeAgentId": a.agent, "status": "todo"}, &issue)
	b.open = append(b.open, issue.ID)
	for {
		for _, r := range b.runs(ctx, t, a) {
			if r.ContextSnapshot["issueId"] == issue.ID {
				return r.ID
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the issue %q woke no run of agent %s: %v", prompt, a.agent, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// runs lists the company's runs.
func (b *paperclipBoard) runs(ctx context.Context, t *testing.T, a paperclipAgent) []paperclipRun {
	t.Helper()
	var runs []paperclipRun
	b.must(ctx, t, "GET", "/api/companies/"+a.company+"/heartbeat-runs", nil, &runs)
	return runs
}

// done marks every issue assign made done, as the agent would have.
func (b *paperclipBoard) done(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, id := range b.open {
		b.must(ctx, t, "PATCH", "/api/issues/"+id, map[string]any{"status": "done"}, nil)
	}
	b.open = nil
}

// checkSpend checks that the company's spend on Paperclip's costs page
// is each succeeded run's cost once, plus extra cents (a lost run's,
// which the adapter books), once Paperclip has booked them (a moment
// after it reports a run over; Paperclip may also start runs of its own
// meanwhile, so both sides are read again until they agree, for up to a
// minute).
func (b *paperclipBoard) checkSpend(ctx context.Context, t *testing.T, a paperclipAgent, extra float64, why string) {
	t.Helper()
	var got, want float64
	for deadline := time.Now().Add(time.Minute); ; {
		want = extra
		for _, r := range b.runs(ctx, t, a) {
			if r.Status == "succeeded" {
				want += r.cents()
			}
		}
		var costs struct {
			SpendCents float64 `json:"spendCents"`
		}
		b.must(ctx, t, "GET", "/api/companies/"+a.company+"/costs/summary", nil, &costs)
		if got = costs.SpendCents; got == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if got != want {
		t.Errorf("company %s: spend %v cents, want %v: %s", a.company, got, want, why)
	}
}

// runJobs lists the Jobs of a Paperclip run (its spool name is the run id
// in lower case) in tenant.
func runJobs(ctx context.Context, t *testing.T, c *testcluster.Cluster, tenant, runID string) []string {
	t.Helper()
	l, err := c.Client().BatchV1().Jobs(tenant).List(ctx, metav1.ListOptions{LabelSelector: "paperclip.io/run-id=" + strings.ToLower(runID)})
	if err != nil {
		t.Fatalf("list the Jobs of run %s: %v", runID, err)
	}
	var names []string
	for _, j := range l.Items {
		names = append(names, j.Name)
	}
	return names
}
