// Package paperclip is pcsync's end-to-end proof against the real Paperclip
// server (`make e2e-paperclip`, part of `make test`): paperclipai from npm
// with its embedded Postgres on free loopback ports, the adapter of
// integrations/paperclip installed into it, and the real `pcsync daemon`
// (local and Kubernetes executors) running the agents it wakes, with a
// stand-in Claude CLI (testdata/standin-claude) that replays transcripts of
// testdata/agent-samples. Every test is in a file tagged `integration`; the
// tools come from hack/paperclip/install.sh and the control plane from
// internal/testing/testcluster. A missing tool fails the tests, saying what to
// install; nothing is skipped.
//
// The control plane has internal/testing/testcluster's real node beside its kwok
// node (root and Debian's containerd, runc and CNI plugins; nothing is
// skipped): realnode_test.go runs a stock claude_local agent's lease pod on
// the real kubelet from a stand-in image built on pcsync's base
// (internal/testing/testimages), and walkthrough_test.go follows the README's and
// docs/paperclip.md's walkthroughs word for word there, from `make build
// images … PUSH=1` to the real Claude Code in a pod saying "Not logged in".
// A test of the real node calls onRealNode first: those tests run after the
// others, one at a time, so that the others run while test/realnode (make
// test runs it beside this package) holds the machine's one real node.
//
// Environment: PCSYNC_E2E_BIN (a pcsync binary instead of building one),
// PCSYNC_E2E_SCREENSHOT (where TestRunPageInChromium copies its picture;
// docs/paperclip-run-page.png is one), PCSYNC_E2E_KEEP (keep the
// directories of failed tests).
//
// `make bench` runs BenchmarkPaperclipKubernetes and BenchmarkPaperclipLocal:
// 50 sequential wakes, a burst of 20 and (Kubernetes) 5 cancels through the
// real server, printed beside the claude-k8s adapter's figures. Measured on
// the shared 2-core machine at load average ~40 (Paperclip itself was slow:
// 3-4 min to start), Kubernetes executor with kwok pods:
//
//	figure                                      claude-k8s   pcsync
//	request written → Job created p50           -            73 ms
//	Paperclip startedAt → Job created p50       ≈ 70 ms *    5,520 ms (Paperclip's own work before execute, at load 40)
//	pod Succeeded → execute returns p50         1,653 ms     485 ms
//	pod Succeeded → execute returns p99         1,985 ms     3,341 ms
//	pod Succeeded → result file p50             -            14 ms
//	burst of 20: wake → Job p50                 5.7 s        22.4 s (load 40; not split into Paperclip / pcsync)
//	cancel → Paperclip run cancelled p50        < 1 s        309 ms
//	cancel → Job gone p50                       6–14 s       116 ms
//	API requests per run                        7            5 (3 mutating, 2 log streams)
//
// * the adapter's part of wake → Job (437 ms, of which ≈ 370 ms Paperclip's).
//
// Local executor (load ~16): 50 sequential wakes in 1 min 45 s; request
// written → process started p50 192 ms; Paperclip startedAt → process
// started p50 1,374 ms; process end → execute returns p50 62 ms, p99
// 1,113 ms; burst of 20: wake → process started p50 9.6 s, process end →
// execute returns p50 676 ms.
package paperclip
