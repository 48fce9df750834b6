// Package pool keeps the warm pools of Company spec.sandbox.warmPool:
// pods Ready that a sandbox lease claims instead of waiting for a pod
// start. A member is the pod leasepod.BuildPod makes, with no role, run,
// agent or lease label (no egress policy selects it, the tenant's deny-all
// does) and nothing of a run in its spec; its pool is its namespace and
// spec hash. The controller (client-go's shape: a handler, an index and a
// lister on the daemon's informer of pcsync's pods, a workqueue of pool
// keys, expectations) keeps each pool at its count; the sandbox
// Manager (package sandbox) takes a Ready member for a claim (Take), makes
// room in a quota (MakeRoom), and is told of members that become Ready or
// go (Deps). Of the controllers of one owner, only the holder of the
// owner's Lease creates and deletes members.
//
// Files:
//
//	pool.go          Label, LabelOwner; a pool's Decl and Key; the declared pools, a member's spec hash, a member built by leasepod.BuildPod with a member's labels; a claim's labels
//	options.go       Options and their defaults
//	lease.go         the owner's Lease: only its holder's pools sync, other controllers of the owner stand by
//	controller.go    Controller in client-go's shape: its handler, index and lister of the owner's members on the daemon's pod informer, a rate-limited workqueue of pool keys, its workers; Deps, Metrics
//	config.go        a changed config queues the pools it changed; the pools' metrics
//	sync.go          sync(key): a pool's declaration against its members in the lister; decide, its pure decision
//	expectations.go  the creates and deletes in flight a pool's sync waits for (client-go's ControllerExpectations)
//	hold.go          per namespace: refills held after a quota refusal, after a claim (the company's refillDelaySec) and while acquires start pods of their own
//	refill.go        creating the missing members
//	remove.go        deleting a member (UID and resourceVersion preconditions); the pool shrinks for quota room (MakeRoom)
//	take.go          Take: a Ready member marked taken for a claim (no lock), Untake
//	status.go        Status: each pool against its declaration (doctor, the metrics)
package pool
