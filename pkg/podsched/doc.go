// Package podsched builds the scheduling part of an agent pod's spec — where
// the pod may run — once, for every pod pcsync makes for an agent: the run
// Jobs of package kubeexec and the sandbox lease pods of package sandbox.
//
// The fields and their sources in the Git config:
//
//	nodeSelector      the agent's spec.agents[].nodeSelector
//	tolerations       the agent's spec.agents[].tolerations
//	runtimeClassName  the Company's spec.runtimeClassName
//	resources         the requests and limits (Resources: Settings' defaults, an agent's own)
//
// A pod that serves no agent declared in Git (a sandbox lease of an agent
// Paperclip holds but the config does not) gets the company's part alone:
// its runtimeClassName, no node selector and no tolerations. The config has
// no affinity, so no pod gets one.
package podsched
