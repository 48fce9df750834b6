package testcluster

import (
	_ "embed"
	"encoding/json"
	"maps"
	"strconv"
	"strings"
	"time"
)

// Pod labels that choose what the fake node (kwok) does with a pod. pcsync copies an
// agent's `labels` onto its Job's pod template, so a test selects an outcome through
// the agent config alone. See the package documentation for the full table.
const (
	// LabelOutcome selects the pod's fate; its values are the Outcome* constants.
	// Without it, a pod owned by a Job succeeds and any other pod stays Running.
	LabelOutcome = "sim.pcsync.io/outcome"
	// LabelDelayMS is the time in milliseconds (decimal integer) between Running and
	// the terminal phase for outcomes succeed and fail (default 500).
	LabelDelayMS = "sim.pcsync.io/delay-ms"
	// LabelReason is the terminated reason for outcome fail (default "Error") or the
	// waiting reason for outcome image-pull (default "ImagePullBackOff").
	LabelReason = "sim.pcsync.io/reason"
	// LabelExitCode is the exit code for outcome fail (default 1).
	LabelExitCode = "sim.pcsync.io/exit-code"
	// LabelMessage is the terminated or waiting message (label-value charset only;
	// the annotation AnnotationMessage, if present, wins and may hold any text).
	LabelMessage = "sim.pcsync.io/message"
	// AnnotationMessage overrides LabelMessage with free text.
	AnnotationMessage = "sim.pcsync.io/message"
	// LabelContainer limits outcome fail to one container (by name); the others
	// terminate with exit code 0. Default: every container fails.
	LabelContainer = "sim.pcsync.io/container"
)

// Values of LabelOutcome.
const (
	// OutcomeRun keeps the pod Running (ready) until it is deleted.
	OutcomeRun = "run"
	// OutcomeSucceed makes the pod Running, then Succeeded (exit 0, reason Completed).
	OutcomeSucceed = "succeed"
	// OutcomeFail makes the pod Running, then Failed with LabelReason, LabelExitCode
	// and LabelMessage on every container's terminated state.
	OutcomeFail = "fail"
	// OutcomeImagePull leaves the pod Pending with its containers waiting with reason
	// LabelReason (ErrImagePull or ImagePullBackOff).
	OutcomeImagePull = "image-pull"
	// OutcomePending leaves the pod scheduled but Pending, containers waiting in
	// ContainerCreating.
	OutcomePending = "pending"
	// OutcomeUnschedulable makes the scheduler refuse the pod (PodScheduled=False,
	// reason Unschedulable): an admission policy gives it a node selector no node has.
	OutcomeUnschedulable = "unschedulable"
)

// DefaultDelay is the time between Running and Succeeded/Failed without LabelDelayMS.
const DefaultDelay = 500 * time.Millisecond

// RunForever returns labels that keep a pod Running until it is deleted (also for a
// Job's pod, which would otherwise succeed).
func RunForever() map[string]string {
	return map[string]string{LabelOutcome: OutcomeRun}
}

// SucceedAfter returns labels that make a pod Running, then Succeeded with exit code 0
// after d (rounded to milliseconds).
func SucceedAfter(d time.Duration) map[string]string {
	return map[string]string{LabelOutcome: OutcomeSucceed, LabelDelayMS: delayMS(d)}
}

// FailWith returns labels that make a pod Running, then Failed after delay, every
// container terminated with reason (a label value, e.g. "OOMKilled", "Error") and
// exitCode.
func FailWith(reason string, exitCode int, delay time.Duration) map[string]string {
	return map[string]string{
		LabelOutcome:  OutcomeFail,
		LabelReason:   reason,
		LabelExitCode: strconv.Itoa(exitCode),
		LabelDelayMS:  delayMS(delay),
	}
}

// OOMKilled returns labels that make a pod fail after delay the way the kernel's OOM
// killer ends a container: reason OOMKilled, exit code 137.
func OOMKilled(delay time.Duration) map[string]string {
	return FailWith("OOMKilled", 137, delay)
}

// ImagePullFailure returns labels that leave a pod Pending with its containers
// waiting with reason ("ErrImagePull" or "ImagePullBackOff"; "" means the latter).
func ImagePullFailure(reason string) map[string]string {
	if reason == "" {
		reason = "ImagePullBackOff"
	}
	return map[string]string{LabelOutcome: OutcomeImagePull, LabelReason: reason}
}

// Unschedulable returns labels that make the scheduler leave a pod Pending with
// condition PodScheduled=False, reason Unschedulable.
func Unschedulable() map[string]string {
	return map[string]string{LabelOutcome: OutcomeUnschedulable}
}

// PendingForever returns labels that leave a scheduled pod Pending with its
// containers waiting in ContainerCreating.
func PendingForever() map[string]string {
	return map[string]string{LabelOutcome: OutcomePending}
}

// Merge returns a new map with the entries of all ms; later maps win.
func Merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		maps.Copy(out, m)
	}
	return out
}

func delayMS(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return strconv.FormatInt(d.Milliseconds(), 10)
}

//go:embed assets/kwok-stages.yaml
var stagesTemplate string

//go:embed assets/kwok-crds.yaml
var kwokCRDs string

//go:embed assets/sim-policy.yaml
var simPolicy string

// outcomeExpr is the jq expression every stage uses for the effective outcome.
const outcomeExpr = `.metadata.labels["` + LabelOutcome + `"] // ` +
	`(if ([.metadata.ownerReferences[]? | select(.kind == "Job")] | length) > 0 ` +
	`then "` + OutcomeSucceed + `" else "` + OutcomeRun + `" end)`

// delayExpr turns LabelDelayMS into a Go duration string; without the label the
// stage's durationMilliseconds applies.
const delayExpr = `(.metadata.labels["` + LabelDelayMS + `"] // empty) + "ms"`

// kwokStages returns the Stage documents kwok is started with.
func kwokStages() string {
	outcome, _ := json.Marshal(outcomeExpr)
	delay, _ := json.Marshal(map[string]any{
		"durationMilliseconds": DefaultDelay.Milliseconds(),
		"durationFrom":         map[string]any{"jq": map[string]any{"expression": delayExpr}},
	})
	return strings.NewReplacer("${OUTCOME}", string(outcome), "${DELAY}", string(delay)).Replace(stagesTemplate)
}
