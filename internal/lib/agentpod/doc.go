// Package agentpod is the contract of the pods pcsync makes for an agent,
// written once for all of them: the run Jobs' pods of package kubeexec,
// the sandbox's lease pods and warm pool members, and doctor's probe pod;
// and the labels of what package render puts in a tenant namespace, whose
// NetworkPolicies select those pods by them.
//
// It holds:
//
//	labels.go     the label keys and values pcsync sets and selects by, each defined here only, and LabelValue
//	token.go      the annotation that carries the hash of a pod's credential token, and the hash
//	status.go     the reading of a pod's status: waiting reasons (an image that will not arrive, a container that cannot be made), unschedulable, Ready, and a pod's reason in words
//
// A label that only one kind of pod carries (the sandbox's lease and pool
// labels, doctor's probe label) stays with the package that makes that
// pod. The hardening and the scheduling of an agent pod (its resources
// among them) are packages podsec and podsched. It imports no package of
// pcsync's: the config's types stay out of the contract.
package agentpod
