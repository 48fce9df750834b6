//go:build integration

package kubeexec

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/pkg/result"
)

// Figures of the crash test: its runs, the agent's concurrency, and how
// long a daemon lives before it is killed (uniform in [minLife, maxLife)).
const (
	crashRuns        = 500
	crashConcurrency = 50
	crashMinLife     = time.Second
	crashMaxLife     = 3 * time.Second
	// crashStuckLives is how many daemon lifetimes in a row may write no
	// result before the test gives up (a livelock, not a slow machine:
	// see killLoop).
	crashStuckLives = 40
)

// TestSIGKILLedDaemonRuns500ExactlyOnce drops 500 requests into the spool
// of the real `pcsync daemon --executor kubernetes` (built from
// ./cmd/pcsync, its own process) and SIGKILLs the daemon 1–3 s (random)
// after each start, starting it again at once, until every request has its
// result. Then: 500 result files, each a single link, every run succeeded
// (none lost), no temp file left in the spool or the state directory. From
// the API server's audit log and the test's own watches: each run's Job
// was created once (one uid seen; at most one create answered 201, the
// others AlreadyExists — or 504 when the API server gave up waiting on a
// create it then stored) and had one pod (no run started twice). The
// figures (kills, restarts, answers by code, what the kills left behind)
// are logged.
//
// It takes a few minutes: it runs under `make test` (CI), not under the
// quick `go test ./...` (no integration tag). Alone:
//
//	go test -tags integration ./pkg/runs/kubeexec -run TestSIGKILLedDaemonRuns500ExactlyOnce -count=1 -v
func TestSIGKILLedDaemonRuns500ExactlyOnce(t *testing.T) {
	// Not parallel: it runs alone, before the package's parallel tests,
	// so that its load slows none of them and theirs does not blur its
	// figures.
	began := time.Now()
	lines := transcript(t, claudeTranscript)
	e := newEnv(t, benchOptions(crashConcurrency, testcluster.SucceedAfter(500*time.Millisecond), lines))
	bin := buildPcsync(t)
	seen := e.watchJobsAndPods(t)

	names := make([]string, crashRuns)
	for i := range names {
		names[i] = fmt.Sprintf("crash-%03d", i)
		e.drop(names[i], nil)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill schedule seed %d", seed)
	k := &killLoop{t: t, e: e, bin: bin, rng: rand.New(rand.NewPCG(seed, seed>>1)), names: names,
		logPath: filepath.Join(t.TempDir(), "daemon.log")}
	k.run()
	wall := time.Since(began)

	seen.stop()
	audit := e.createsByName(t)

	// The spool: a result for every request, each one file of one link,
	// every run succeeded; nothing else but the requests and their logs.
	var lost []string
	for _, name := range names {
		job := e.jobName(name)
		why := ""
		path := filepath.Join(e.spool, name+result.Suffix)
		if fi, err := os.Lstat(path); err != nil {
			why = "no result"
		} else if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
			t.Errorf("%s has %d links, want 1 (a result writer stopped between link and unlink)", filepath.Base(path), st.Nlink)
		}
		if why == "" {
			r, err := result.Read(path)
			switch {
			case err != nil:
				why = err.Error()
			case r.Status != result.StatusSucceeded:
				why = fmt.Sprintf("%s %s %q", r.Status, deref(r.ErrorCode), deref(r.ErrorMessage))
			}
		}
		if why != "" {
			lost = append(lost, fmt.Sprintf("%s: %s; Job creates in the audit log (code: count) %v, Jobs seen %d",
				name, why, audit.jobs[job], seen.jobCount(job)))
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d runs lost (no result, or not succeeded):\n%s", len(lost), crashRuns, strings.Join(lost, "\n"))
	}
	if extra := strayFiles(t, e.spool, names); len(extra) > 0 {
		t.Errorf("files left in the spool that are neither a request, its result nor its log:\n%s", strings.Join(extra, "\n"))
	}
	if tmps := tempFiles(t, e.state); len(tmps) > 0 {
		t.Errorf("temp files left in the state directory:\n%s", strings.Join(tmps, "\n"))
	}

	// The API server and the watches: each run's Job created once (one
	// uid; at most one create answered 201 — a create the API server
	// answered 504 may have been stored all the same, and the next
	// daemon's create of it is answered AlreadyExists), one Secret stored,
	// one pod (the run started once).
	var twice []string
	for _, name := range names {
		job := e.jobName(name)
		codes := audit.jobs[job]
		if n := seen.jobCount(job); n != 1 || codes[201] > 1 || codes[201] == 0 && timeouts(codes) == 0 {
			twice = append(twice, fmt.Sprintf("%s: %d Jobs seen (uids), Job creates (code: count) %v", name, n, codes))
		}
		if n := audit.secrets[job][201]; n > 1 {
			twice = append(twice, fmt.Sprintf("%s: %d Secrets created", name, n))
		}
		if n := seen.podCount(job); n != 1 {
			twice = append(twice, fmt.Sprintf("%s: %d pods", name, n))
		}
	}
	if len(twice) > 0 {
		t.Errorf("runs not started exactly once:\n%s", strings.Join(twice, "\n"))
	}
	if audit.pods != crashRuns {
		t.Errorf("%d pods created in the namespace (audit log), want %d: one per run", audit.pods, crashRuns)
	}

	// What the kills left behind (reported, not failed: a daemon killed
	// between a run's result and its clean-up leaves the finished Job to
	// its TTL).
	left, err := e.cs.BatchV1().Jobs(e.ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts := k.logCounts()
	t.Logf("crash test: %d runs, %d succeeded in %s; %d daemons started, %d SIGKILLs (%s–%s after a start); "+
		"Job creates by response code %v, Secret creates by response code %v, pods created %d; "+
		"daemon log: %d Job created, %d adopted, %d followed after AlreadyExists, %d Job gone, %d result already written, %d temp files removed; "+
		"left behind: %d finished Jobs (for their TTL)",
		crashRuns, crashRuns-len(lost), wall.Round(time.Second), k.starts, k.kills, crashMinLife, crashMaxLife,
		audit.jobCodes, audit.secretCodes, audit.pods,
		counts["Job created"], counts["adopting the run's Job"], counts["the run's Job exists already; following it"],
		counts["the run's Job is gone"], counts["result already written; keeping the first"],
		counts["removed a temp file an earlier daemon left"], len(left.Items))
	if t.Failed() {
		k.dumpLog()
	}
}

// timeouts counts the answers of codes that leave the outcome open: the
// API server gave up waiting (504) or failed (5xx), or no answer was
// recorded.
func timeouts(codes map[int]int) int {
	n := 0
	for code, c := range codes {
		if code >= 500 || code == 0 {
			n += c
		}
	}
	return n
}

// creates are the create requests of the audit log in the env's
// namespace: Jobs and Secrets by name and response code, their totals by
// code, and the pods created.
type creates struct {
	jobs, secrets         map[string]map[int]int
	jobCodes, secretCodes map[int]int
	pods                  int
}

func (e *env) createsByName(t *testing.T) creates {
	t.Helper()
	evs, err := e.c.AuditEvents(func(a testcluster.AuditEvent) bool {
		return a.Verb == "create" && a.ObjectRef != nil && a.ObjectRef.Namespace == e.ns && a.ObjectRef.Subresource == ""
	})
	if err != nil {
		t.Fatal(err)
	}
	c := creates{jobs: map[string]map[int]int{}, secrets: map[string]map[int]int{}, jobCodes: map[int]int{}, secretCodes: map[int]int{}}
	add := func(m map[string]map[int]int, name string, code int) {
		if m[name] == nil {
			m[name] = map[int]int{}
		}
		m[name][code]++
	}
	for _, a := range evs {
		code := 0
		if a.ResponseStatus != nil {
			code = a.ResponseStatus.Code
		}
		switch a.ObjectRef.Resource {
		case "pods":
			if code == 201 {
				c.pods++
			}
		case "jobs":
			add(c.jobs, a.ObjectRef.Name, code)
			c.jobCodes[code]++
		case "secrets":
			add(c.secrets, a.ObjectRef.Name, code)
			c.secretCodes[code]++
		}
	}
	return c
}

// buildPcsync builds ./cmd/pcsync into a temp directory.
func buildPcsync(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pcsync")
	build := exec.Command("go", "build", "-o", bin, "github.com/pcsync/pcsync/cmd/pcsync")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/pcsync: %v\n%s", err, out)
	}
	return bin
}

// killLoop starts the daemon, kills it with SIGKILL after a random
// lifetime, and starts it again, until every request has its result.
type killLoop struct {
	t       *testing.T
	e       *env
	bin     string
	rng     *rand.Rand
	names   []string
	logPath string
	// kubeconfig is the daemons' (default: the test cluster's).
	kubeconfig string
	// starts and kills count daemon processes started and SIGKILLed.
	starts, kills int
}

// lifeLines are the messages the daemon logs once it serves the spool
// (the spool server's, and the older runs daemon's).
var lifeLines = []string{`msg="spool server started"`, `msg="daemon started"`}

// run kills and restarts the daemon until every request has its result,
// then stops the last daemon with SIGTERM. A daemon's lifetime counts from
// its start; after a lifetime that wrote no result, the next one counts
// from the moment the daemon serves the spool (or writes a result, should
// its log say so in other words), so that a machine too slow to start the
// daemon within the lifetime still makes progress. The test
// fails after crashStuckLives lifetimes in a row without a new result.
func (k *killLoop) run() {
	t := k.t
	logf, err := os.OpenFile(k.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	done, stuck := k.results(), 0
	for done < len(k.names) {
		fromServing := stuck > 0
		life := crashMinLife + time.Duration(k.rng.Int64N(int64(crashMaxLife-crashMinLife)))
		cmd, serving, exited := k.start(logf)
		var timer <-chan time.Time
		if !fromServing {
			timer = time.After(life)
		}
		progress := time.NewTicker(250 * time.Millisecond)
	live:
		for {
			select {
			case <-serving:
				serving = nil
				if timer == nil {
					timer = time.After(life)
				}
			case <-progress.C:
				if timer == nil && k.results() > done {
					timer = time.After(life)
				}
			case err := <-exited:
				k.dumpLog()
				t.Fatalf("daemon #%d exited on its own (%v) before it was killed", k.starts, err)
			case <-timer:
				break live
			}
		}
		progress.Stop()
		if k.results() == len(k.names) {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			<-exited
			break
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill daemon #%d: %v", k.starts, err)
		}
		<-exited
		k.kills++
		now := k.results()
		if now > done {
			done, stuck = now, 0
			continue
		}
		if stuck++; stuck >= crashStuckLives {
			k.dumpLog()
			t.Fatalf("%d daemon lifetimes in a row wrote no result (%d of %d results)", stuck, done, len(k.names))
		}
	}
}

// start starts one daemon whose output goes to logf; serving is closed
// when it logs that it serves the spool, exited receives Wait's error.
func (k *killLoop) start(logf *os.File) (*exec.Cmd, chan struct{}, chan error) {
	t, e := k.t, k.e
	k.starts++
	fmt.Fprintf(logf, "=== daemon #%d started at %s\n", k.starts, time.Now().Format(time.RFC3339Nano))
	kubeconfig := k.kubeconfig
	if kubeconfig == "" {
		kubeconfig = e.c.KubeconfigPath()
	}
	cmd := exec.Command(k.bin, "daemon", "--executor", "kubernetes", "--no-reconcile", "--config", e.cfgDir,
		"--spool", e.spool, "--state-dir", e.state, "--kubeconfig", kubeconfig, "--rescan-interval", "500ms",
		"--skip-network-check") // no probe pod among the Jobs' pods
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY="+testAPIKey)
	// A test binary that dies (timeout, panic) takes its daemon along.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	serving := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		once := sync.OnceFunc(func() { close(serving) })
		for sc.Scan() {
			line := sc.Text()
			_, _ = fmt.Fprintln(logf, line)
			for _, l := range lifeLines {
				if strings.Contains(line, l) {
					once()
				}
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-copied
		exited <- err
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, serving, exited
}

// results counts the requests with a result file.
func (k *killLoop) results() int {
	n := 0
	for _, name := range k.names {
		if _, err := os.Lstat(filepath.Join(k.e.spool, name+result.Suffix)); err == nil {
			n++
		}
	}
	return n
}

// logCounts counts the daemons' log lines by message, for the messages the
// test reports.
func (k *killLoop) logCounts() map[string]int {
	data, err := os.ReadFile(k.logPath)
	if err != nil {
		k.t.Fatal(err)
	}
	counts := map[string]int{}
	for _, msg := range []string{"Job created", "adopting the run's Job", "the run's Job exists already; following it",
		"the run's Job is gone", "result already written; keeping the first", "removed a temp file an earlier daemon left"} {
		counts[msg] = strings.Count(string(data), `msg="`+msg+`"`)
	}
	return counts
}

// dumpLog writes the daemons' log lines that are not routine to the test
// log: warnings, errors and the daemon boundaries.
func (k *killLoop) dumpLog() {
	data, err := os.ReadFile(k.logPath)
	if err != nil {
		k.t.Errorf("cannot read the daemons' log to show it: %v", err)
		return
	}
	var keep []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "===") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") ||
			!strings.Contains(line, "level=") && line != "" {
			keep = append(keep, line)
		}
	}
	if len(keep) > 400 {
		keep = append(keep[:200], append([]string{fmt.Sprintf("... %d lines ...", len(keep)-400)}, keep[len(keep)-200:]...)...)
	}
	k.t.Logf("daemon log (%s), warnings and errors:\n%s", k.logPath, strings.Join(keep, "\n"))
}

// strayFiles lists the spool's files other than the requests, their
// results and their logs (a temp file of the result writer, say).
func strayFiles(t *testing.T, spool string, names []string) []string {
	t.Helper()
	want := map[string]bool{}
	for _, name := range names {
		for _, suffix := range []string{".json", result.Suffix, ".log"} {
			want[name+suffix] = true
		}
	}
	entries, err := os.ReadDir(spool)
	if err != nil {
		t.Fatal(err)
	}
	var extra []string
	for _, de := range entries {
		if !want[de.Name()] {
			extra = append(extra, de.Name())
		}
	}
	return extra
}

// tempFiles lists the *.tmp files under dir.
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var tmps []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(d.Name(), ".tmp") {
			tmps = append(tmps, path)
		}
		return nil
	})
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	sort.Strings(tmps)
	return tmps
}

// jobsAndPods are the uids of every Job and pod a watch saw in the env's
// namespace, by Job name.
type jobsAndPods struct {
	mu   sync.Mutex
	jobs map[string][]types.UID
	pods map[string][]types.UID
	stop func()
}

// watchJobsAndPods records every Job and pod of the namespace from now on.
func (e *env) watchJobsAndPods(t *testing.T) *jobsAndPods {
	t.Helper()
	s := &jobsAndPods{jobs: map[string][]types.UID{}, pods: map[string][]types.UID{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(e.ns))
	add := func(m map[string][]types.UID, key string, uid types.UID) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if key != "" && !slices.Contains(m[key], uid) {
			m[key] = append(m[key], uid)
		}
	}
	onJob := func(obj any) {
		if j, ok := obj.(*batchv1.Job); ok {
			add(s.jobs, j.Name, j.UID)
		}
	}
	onPod := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			add(s.pods, p.Labels["batch.kubernetes.io/job-name"], p.UID)
		}
	}
	_, _ = f.Batch().V1().Jobs().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onJob, UpdateFunc: func(_, obj any) { onJob(obj) },
	})
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
	})
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	var once sync.Once
	s.stop = func() { once.Do(func() { cancel(); f.Shutdown() }) }
	t.Cleanup(s.stop)
	return s
}

// jobCount is how many Jobs (uids) of that name were seen.
func (s *jobsAndPods) jobCount(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.jobs[job])
}

// podCount is how many pods of the Job were seen.
func (s *jobsAndPods) podCount(job string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pods[job])
}
