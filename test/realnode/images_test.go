//go:build integration

package realnode

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testimages"
	"github.com/pcsync/pcsync/pkg/images"
)

// imageTag is the tag of every image these tests push: config.ImageDefaults'
// Tag in their configs.
const imageTag = "realnode"

// pushed are the images of the package's tests in the real node's
// registry, built once from make images' definitions (internal/imagebuild).
type pushed struct {
	// Registry is host:port/org of pcsync's images whose claude image is
	// the stand-in CLI (standInScript): Settings spec.images.registry.
	Registry string
	// RealRegistry is host:port/org of the images as make images builds
	// them, the real Claude Code CLI included.
	RealRegistry string
	// Foreign is the stand-in claude image under a name that is none of
	// pcsync's: a user's own image, which pcsync cannot know to hold it.
	Foreign string
}

var (
	pushOnce     sync.Once
	pushedImages pushed
	pushErr      error
)

// pushImages builds pcsync's base, its own image and the Claude Code image
// (cached by internal/imagebuild; pcsync's layer from this tree), pushes
// them to the real node's registry under RealRegistry, and the base with
// the stand-in claude under Registry.
func pushImages(t testing.TB) pushed {
	t.Helper()
	node := testcluster.Get(t).RealNode()
	if node == nil {
		t.Fatal("the cluster has no real node (TestMain sets Options.RealNode)")
	}
	pushOnce.Do(func() { pushedImages, pushErr = buildAndPush(node.Registry()) })
	if pushErr != nil {
		t.Fatal(pushErr)
	}
	return pushedImages
}

func buildAndPush(reg *testcluster.Registry) (pushed, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	built, err := testimages.Build(ctx, []string{images.Base, images.Pcsync, images.Agent("claude")}, imageTag)
	if err != nil {
		return pushed{}, err
	}
	p := pushed{Registry: reg.Host() + "/standin", RealRegistry: reg.Host() + "/pcsync", Foreign: reg.Host() + "/acme/agent:" + imageTag}
	if err := testimages.Push(ctx, reg, p.RealRegistry, imageTag, built); err != nil {
		return pushed{}, err
	}
	standIn := testimages.DefaultStandInOptions()
	standIn.Base = built[images.Base]
	standIn.Files = map[string]string{
		"usr/local/bin/claude":                         standInScript,
		"usr/local/share/pcsync-standin/auth.jsonl":    mustRead("../../pkg/adapters/testdata/claude/real-2.1.197-not-logged-in.jsonl"),
		"usr/local/share/pcsync-standin/call-model.js": callModelScript,
	}
	for _, ref := range []string{images.Ref(p.Registry, images.Agent("claude"), imageTag), p.Foreign} {
		if _, err := testimages.StandIn(ctx, reg, ref, standIn); err != nil {
			return pushed{}, err
		}
	}
	if err := testimages.Push(ctx, reg, p.Registry, imageTag, map[string]v1.Image{images.Pcsync: built[images.Base]}); err != nil {
		return pushed{}, err
	}
	return p, nil
}

func mustRead(path string) string {
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		panic(err)
	}
	return string(b)
}

// standInScript stands in for Claude Code: the prompt, on stdin, picks what
// it does. Its output is Claude Code's stream-json.
const standInScript = `#!/bin/sh
prompt=$(cat)
init='{"type":"system","subtype":"init","session_id":"standin-1","model":"claude-sonnet-4-6","cwd":"/workspace"}'
case "$prompt" in
*succeed-later*)
	# Outlives a kubelet relist: the log is followed while it runs.
	echo "$init"
	sleep 3
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":3000,"num_turns":1,"result":"Done later.","session_id":"standin-1","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":2}}'
	;;
*succeed-in-1s*)
	# A whole run of a 1 s agent (BenchmarkRunJob).
	echo "$init"
	sleep 1
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":1000,"num_turns":1,"result":"Done in a second.","session_id":"standin-1","total_cost_usd":0.001,"usage":{"input_tokens":10,"output_tokens":2}}'
	;;
*succeed-slowly*)
	# Long enough to replace the pod of Paperclip and pcsync while it runs.
	echo "$init"
	sleep 25
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":25000,"num_turns":1,"result":"Done slowly.","session_id":"standin-1","total_cost_usd":0.05,"usage":{"input_tokens":50,"output_tokens":5}}'
	;;
*succeed*)
	echo "$init"
	echo '{"type":"assistant","message":{"model":"claude-sonnet-4-6","role":"assistant","content":[{"type":"text","text":"The README says hello."}],"usage":{"input_tokens":120,"output_tokens":8}},"session_id":"standin-1"}'
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":12,"num_turns":1,"result":"The README says hello.","session_id":"standin-1","total_cost_usd":0.0123,"usage":{"input_tokens":120,"cache_creation_input_tokens":30,"cache_read_input_tokens":400,"output_tokens":8}}'
	;;
*call-model*)
	# The CLI's first request goes through the egress proxy (proxy_zero_test.go).
	echo "$init"
	out=$(node /usr/local/share/pcsync-standin/call-model.js 2>&1)
	case "$out" in
	"status 200"*)
		echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":10,"num_turns":1,"result":"The model answered.","session_id":"standin-1","total_cost_usd":0.001,"usage":{"input_tokens":7,"output_tokens":1}}'
		;;
	*)
		echo "stand-in: the first model request failed: $out" >&2
		exit 1
		;;
	esac
	;;
*fail-auth*)
	cat /usr/local/share/pcsync-standin/auth.jsonl
	exit 1
	;;
*no-handler*)
	# As PID 1 it would ignore SIGTERM (no handler); under pcsync init it dies by it.
	echo "$init"
	exec sleep 600
	;;
*ignore-term*)
	echo "$init"
	trap '' TERM
	sleep 600 &
	wait
	;;
*haiku*)
	# docs/getting-started.md's first run (TestGettingStarted).
	echo "$init"
	echo '{"type":"result","subtype":"success","is_error":false,"duration_ms":20,"num_turns":1,"result":"Pods rise and fall / the scheduler finds a node / the Job completes.","session_id":"standin-1","total_cost_usd":0.002,"usage":{"input_tokens":40,"output_tokens":17}}'
	;;
*)
	echo "stand-in: unknown prompt" >&2
	exit 2
	;;
esac
`
