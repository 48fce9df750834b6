package testcluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeconfigEnv names the environment variable that makes Main attach to a running
// cluster (e.g. `PCSYNC_TEST_KUBECONFIG=$PWD/.dev/kubeconfig`) instead of starting one.
const KubeconfigEnv = "PCSYNC_TEST_KUBECONFIG"

var (
	sharedMu sync.Mutex
	shared   *Cluster
)

// Main is the TestMain helper: it starts one cluster for the test binary (or attaches
// to the one named by $PCSYNC_TEST_KUBECONFIG), runs m, stops the cluster and returns
// the exit code. If the binaries are missing or the cluster does not start, it prints
// why and returns 1: integration tests fail, they are never skipped. SIGINT/SIGTERM
// stop the cluster before the process exits. TestMain and the tests that call Get
// live in files built only with the integration tag:
//
//	//go:build integration
//
//	func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
func Main(m *testing.M) int { return MainWith(m, nil) }

// MainWith is Main with options: configure, if not nil, changes the Options the
// cluster starts with (after DefaultOptions, Logf and KeepWorkDir are set). A test
// binary that needs the real node:
//
//	func TestMain(m *testing.M) {
//		os.Exit(testcluster.MainWith(m, func(o *testcluster.Options) {
//			o.RealNode = &testcluster.RealNodeOptions{}
//		}))
//	}
//
// Attached to a running cluster ($PCSYNC_TEST_KUBECONFIG), configure is not called,
// and asking for a real node fails unless that cluster has one.
func MainWith(m *testing.M, configure func(*Options)) int {
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run() // listing tests needs no cluster
	}
	logf := func(format string, args ...any) {
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c *Cluster
	var err error
	start := time.Now()
	if kc := os.Getenv(KubeconfigEnv); kc != "" {
		c, err = Attach(ctx, kc)
		if err == nil {
			logf("testcluster: attached to %s", kc)
		}
		if err == nil && configure != nil {
			var want Options
			configure(&want)
			if want.RealNode != nil && c.RealNode() == nil {
				err = fmt.Errorf("attached cluster %s has no real node, and the tests need one", kc)
			}
		}
	} else {
		opts := DefaultOptions()
		opts.Logf = logf
		opts.KeepWorkDir = os.Getenv("PCSYNC_TEST_KEEP_WORKDIR") != ""
		if configure != nil {
			configure(&opts)
		}
		// Ctrl-C during the start aborts it; Start then stops what it started.
		stopSig := notifyCancel(cancel)
		c, err = Start(ctx, opts)
		stopSig()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: test cluster: %v\n", err)
		return 1
	}
	logf("testcluster: ready in %s", time.Since(start).Round(time.Millisecond))

	sharedMu.Lock()
	shared = c
	sharedMu.Unlock()

	// A signal while tests run: stop the cluster, then exit like the signal would.
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-sigc:
			fmt.Fprintf(os.Stderr, "testcluster: %v: stopping the cluster\n", s)
			_ = c.Close()
			os.Exit(128 + int(s.(syscall.Signal)))
		case <-done:
		}
	}()

	code := m.Run()
	close(done)
	signal.Stop(sigc)
	if err := c.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "testcluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// notifyCancel cancels on SIGINT/SIGTERM until the returned function is called.
func notifyCancel(cancel context.CancelFunc) func() {
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		select {
		case <-sigc:
			cancel()
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigc)
		close(done)
	}
}

// Get returns the shared cluster of this test binary. It fails the test if the
// package's TestMain does not call Main.
func Get(t testing.TB) *Cluster {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		t.Fatal("testcluster.Get: no cluster; the package needs " +
			"`func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }`")
	}
	return shared
}

var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace named <prefix>-<random> (prefix lower-cased and
// reduced to DNS-label characters, at most 40 of them) with the given labels, waits
// until its default ServiceAccount exists (pods are refused before that), and deletes
// it when the test ends (without waiting for the deletion to finish).
func (c *Cluster) Namespace(t testing.TB, prefix string, labels map[string]string) string {
	t.Helper()
	prefix = strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(prefix), "-"), "-")
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-")
	}
	if prefix == "" {
		prefix = "test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testcluster: create namespace %s-*: %v", prefix, err)
	}
	name := ns.Name
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := c.client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("testcluster: delete namespace %s: %v", name, err)
		}
		if err := c.deleteClusterLogs(ctx, name); err != nil {
			t.Errorf("testcluster: %v", err)
		}
		if err := c.StopExec(ctx, name); err != nil {
			t.Errorf("%v", err)
		}
	})
	if err := c.waitServiceAccount(ctx, name, nil); err != nil {
		t.Fatalf("testcluster: namespace %s: %v", name, err)
	}
	return name
}
