// Package leasepod is a sandbox lease's record and the pod built from it:
// the hardened pod whose PID 1 is pcsync's command server (BuildPod), its
// labels and annotations, the helper container that copies pcsync into an
// image that lacks it, and the paths inside the pod. The sandbox Manager
// (package sandbox) journals the records and creates their pods; the warm
// pools (package pool) build their members with the same BuildPod.
//
// Files:
//
//	record.go  Record, the journal's record of a lease; its id and paths; the paths inside a lease pod
//	build.go   BuildPod: the hardened lease pod; its labels and annotations
//	claim.go   BuildClaim: a kept lease's claim for its workspace and HOME, its record on it; the pod's mounts of it
//	helper.go  the helper container that copies pcsync into a pod whose image lacks it (postStart hook), its resources
package leasepod
