// Package podsec builds the hardened part of an agent pod's spec once, for
// every pod pcsync makes for an agent: the run Jobs of package kubeexec and
// the sandbox lease pods of package sandbox (as package podsched builds
// where they run). What it sets lets the pod pass Pod Security
// "restricted":
//
//	serviceAccountName               the tenant's ServiceAccount, its token not mounted
//	enableServiceLinks               false: no Service addresses in the env
//	restartPolicy                    Never
//	securityContext (pod)            runAsNonRoot; runAsUser, runAsGroup and fsGroup UID (fsGroupChangePolicy OnRootMismatch); seccomp RuntimeDefault
//	securityContext (each container) no privilege escalation, not privileged, read-only root filesystem, runAsNonRoot, every capability dropped, seccomp RuntimeDefault
//	imagePullPolicy (each container) IfNotPresent
//
// The root filesystem being read-only, what an agent writes goes to
// emptyDirs (EmptyDir), each capped at the company's
// jobs.emptyDirSizeLimit.
package podsec
