package pool

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/pcsync/pcsync/internal/lib/agentpod"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/sandbox/leasepod"
)

// Label marks a warm pool member, an anonymous pod no lease holds yet
// (Company spec.sandbox.warmPool). Its value is the pool's spec hash
// (specHash): a lease whose pod would have the same spec claims it. A
// member has no role label, so that the company's egress policies
// (selecting paperclip.io/role=agent) do not select it until it is claimed;
// the tenant's deny-all policy does.
const Label = "pcsync.io/sandbox-pool"

// LabelOwner is the deployment of pcsync that keeps a warm pool member
// (Options.Owner): a daemon keeps, adopts and drains only its own.
const LabelOwner = "pcsync.io/sandbox-pool-owner"

// Decl is one warm pool the config declares: count members of one
// pod spec in a company's namespace. Pools of one company whose members
// would be the same pod are one pool of their counts' sum.
type Decl struct {
	// key is the pool's namespace and spec hash.
	key Key
	// count is how many Ready members to keep.
	count int
	// Rec is a member's record but for its id and expiry.
	Rec leasepod.Record
	// refillDelay is how long a claim of a member holds the namespace's
	// refills (Company spec.sandbox.refillDelaySec).
	refillDelay time.Duration
}

// Key names a pool: its namespace and its members' spec hash.
type Key struct {
	Namespace string
	Hash      string
}

// String is the key as logs and doctor show it: namespace/hash.
func (k Key) String() string { return k.Namespace + "/" + k.Hash }

// parseKey is the key whose String is s.
func parseKey(s string) Key {
	ns, hash, _ := strings.Cut(s, "/")
	return Key{Namespace: ns, Hash: hash}
}

// declare gives the warm pools of model's companies, by key, each
// member's record placed by the Manager (Deps.Place); a suspended
// company's are not declared (no lease may claim a member: they are
// drained, and refilled once it is resumed). A pool whose pod
// cannot be built (a broken config the validator let through) is logged and
// left out.
func (c *Controller) declare(model *config.Model) map[Key]*Decl {
	out := map[Key]*Decl{}
	for i := range model.Companies {
		co := &model.Companies[i]
		if co.Spec.Sandbox == nil || co.Suspended() {
			continue
		}
		for _, p := range co.Spec.Sandbox.WarmPool {
			r := leasepod.Record{Namespace: model.Namespace(co), Company: co.Slug(), Image: model.WarmPoolImage(p), Agent: p.Agent}
			c.place(&r, model)
			hash, err := specHash(r, model, c.hostRoot)
			if err != nil {
				c.log.Warn("sandbox: warm pool left out: its pod cannot be built", slog.String("company", co.Slug()), slog.String("image", r.Image), slog.Any("error", err))
				continue
			}
			k := Key{Namespace: r.Namespace, Hash: hash}
			if d, ok := out[k]; ok {
				d.count += p.Count
				continue
			}
			out[k] = &Decl{key: k, count: p.Count, Rec: r, refillDelay: co.RefillDelay()}
		}
	}
	return out
}

// KeyOf is the pool whose members lease r would claim (the same spec
// hash), and whether the config declares it.
func (c *Controller) KeyOf(r *leasepod.Record, model *config.Model) (Key, bool) {
	hash, err := specHash(*r, model, c.hostRoot)
	if err != nil {
		return Key{}, false
	}
	k := Key{Namespace: r.Namespace, Hash: hash}
	return k, c.declared(k) != nil
}

// specHash is the hash of the pod spec a lease of record r gets, but for
// what differs from one lease to the next (its name, its paths under a
// shared host, its deadline, its labels and annotations), with the
// company's id: a member of that hash is the pod r would get. Sixteen hex
// digits, a label value.
func specHash(r leasepod.Record, model *config.Model, hostRoot string) (string, error) {
	r.ID = "pool"
	r.ExpiresAt = time.Now().Add(time.Hour)
	r.SetPaths(hostRoot)
	pod, err := leasepod.BuildPod(&r, model)
	if err != nil {
		return "", err
	}
	pod.Spec.ActiveDeadlineSeconds = nil
	c, _ := model.Company(r.Company)
	b, err := json.Marshal(struct {
		Namespace, Company, CompanyID string
		Spec                          corev1.PodSpec
	}{r.Namespace, r.Company, c.Spec.ID, pod.Spec})
	if err != nil {
		return "", fmt.Errorf("Pod/%s: spec hash: %w", r.Namespace, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// build returns a new member of pool d: the pod leasepod.BuildPod makes
// for a lease of the pool's record (hardened, placed and started exactly as a
// lease pod is), with the labels of an anonymous member instead of a
// lease's (no role, no run, agent or lease) and no lease's annotations.
// Its activeDeadlineSeconds covers the member's life in the pool and the
// longest lease: a claim lowers it to the lease's expiry.
func (c *Controller) build(d *Decl, model *config.Model, now time.Time) (*corev1.Pod, leasepod.Record, error) {
	r := d.Rec
	r.ID = leasepod.NewID()
	r.CreatedAt = now
	r.ExpiresAt = now.Add(c.opts.MemberMaxAge + c.maxLeaseTTL).Truncate(time.Second)
	r.SetPaths(c.hostRoot)
	pod, err := leasepod.BuildPod(&r, model)
	if err != nil {
		return nil, leasepod.Record{}, err
	}
	co, _ := model.Company(r.Company)
	pod.Labels = memberLabels(co, d.key.Hash, c.opts.Owner)
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/default-container": leasepod.ContainerName}
	return pod, r, nil
}

// memberLabels are a member's labels: pcsync's, its company's, its pool's
// and its owner's; no role (no egress policy selects it) and nothing of a
// run.
func memberLabels(c *config.Company, hash, owner string) map[string]string {
	return map[string]string{
		agentpod.LabelManagedBy: agentpod.ManagedByValue,
		agentpod.LabelCompany:   agentpod.LabelValue(c.Slug()),
		agentpod.LabelCompanyID: agentpod.LabelValue(c.Spec.ID),
		Label:                   hash,
		LabelOwner:              owner,
	}
}

// ClaimLabels is the label patch of a claim that makes a member lease r's
// pod: the lease's labels, and the member's pool and owner labels removed
// (null in a merge patch), with the company key of a member an older
// pcsync made.
func ClaimLabels(r *leasepod.Record, c *config.Company) map[string]any {
	out := map[string]any{Label: nil, LabelOwner: nil, agentpod.LegacyLabelCompany: nil}
	for k, v := range leasepod.Labels(r, c) {
		out[k] = v
	}
	return out
}
