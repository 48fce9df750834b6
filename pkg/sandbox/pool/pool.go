package sandbox

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
)

// LabelPool marks a warm pool member, an anonymous pod no lease holds yet
// (Company spec.sandbox.warmPool). Its value is the pool's spec hash
// (specHash): a lease whose pod would have the same spec claims it. A
// member has no role label, so that the company's egress policies
// (selecting paperclip.io/role=agent) do not select it until it is claimed;
// the tenant's deny-all policy does.
const LabelPool = "pcsync.io/sandbox-pool"

// LabelPoolOwner is the deployment of pcsync that keeps a warm pool member
// (PoolOptions.Owner): a daemon keeps, adopts and drains only its own.
const LabelPoolOwner = "pcsync.io/sandbox-pool-owner"

// poolDecl is one warm pool the config declares: count members of one
// pod spec in a company's namespace. Pools of one company whose members
// would be the same pod are one pool of their counts' sum.
type poolDecl struct {
	// key is the pool's namespace and spec hash.
	key poolKey
	// count is how many Ready members to keep.
	count int
	// rec is a member's record but for its id and expiry.
	rec Record
	// refillDelay is how long a claim of a member holds the namespace's
	// refills (Company spec.sandbox.refillDelaySec).
	refillDelay time.Duration
}

// poolKey names a pool: its namespace and its members' spec hash.
type poolKey struct {
	Namespace string
	Hash      string
}

// String is the key as logs and doctor show it: namespace/hash.
func (k poolKey) String() string { return k.Namespace + "/" + k.Hash }

// parsePoolKey is the key whose String is s.
func parsePoolKey(s string) poolKey {
	ns, hash, _ := strings.Cut(s, "/")
	return poolKey{Namespace: ns, Hash: hash}
}

// declaredPools are the warm pools of model's companies, by key. A pool
// whose pod cannot be built (a broken config the validator let through)
// is logged and left out.
func (m *Manager) declaredPools(model *config.Model) map[poolKey]*poolDecl {
	out := map[poolKey]*poolDecl{}
	for i := range model.Companies {
		c := &model.Companies[i]
		if c.Spec.Sandbox == nil {
			continue
		}
		for _, p := range c.Spec.Sandbox.WarmPool {
			r := Record{Namespace: model.Namespace(c), Company: c.Slug(), Image: model.WarmPoolImage(p), Agent: p.Agent}
			m.placeServer(&r, model)
			hash, err := specHash(r, model, m.opts.HostRoot)
			if err != nil {
				m.log.Warn("sandbox: warm pool left out: its pod cannot be built", slog.String("company", c.Slug()), slog.String("image", r.Image), slog.Any("error", err))
				continue
			}
			k := poolKey{Namespace: r.Namespace, Hash: hash}
			if d, ok := out[k]; ok {
				d.count += p.Count
				continue
			}
			out[k] = &poolDecl{key: k, count: p.Count, rec: r, refillDelay: c.RefillDelay()}
		}
	}
	return out
}

// specHash is the hash of the pod spec a lease of record r gets, but for
// what differs from one lease to the next (its name, its paths under a
// shared host, its deadline, its labels and annotations), with the
// company's id: a member of that hash is the pod r would get. Sixteen hex
// digits, a label value.
func specHash(r Record, model *config.Model, hostRoot string) (string, error) {
	r.ID = "pool"
	r.ExpiresAt = time.Now().Add(time.Hour)
	r.setPaths(hostRoot)
	pod, err := BuildPod(&r, model)
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

// buildMember returns a new member of pool d: the pod BuildPod makes for a
// lease of the pool's record (hardened, placed and started exactly as a
// lease pod is), with the labels of an anonymous member instead of a
// lease's (no role, no run, agent or lease) and no lease's annotations.
// Its activeDeadlineSeconds covers the member's life in the pool and the
// longest lease: a claim lowers it to the lease's expiry.
func (m *Manager) buildMember(d *poolDecl, model *config.Model, now time.Time) (*corev1.Pod, Record, error) {
	r := d.rec
	r.ID = newLeaseID()
	r.CreatedAt = now
	r.ExpiresAt = now.Add(m.opts.Pool.MemberMaxAge + m.opts.MaxLeaseTTL).Truncate(time.Second)
	r.setPaths(m.opts.HostRoot)
	pod, err := BuildPod(&r, model)
	if err != nil {
		return nil, Record{}, err
	}
	c, _ := model.Company(r.Company)
	pod.Labels = memberLabels(c, d.key.Hash, m.opts.Pool.Owner)
	pod.Annotations = map[string]string{"kubectl.kubernetes.io/default-container": ContainerName}
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
		LabelPool:               hash,
		LabelPoolOwner:          owner,
	}
}

// claimLabels is the label patch of a claim: the lease's labels, and the
// member's pool and owner labels removed (null in a merge patch), with the
// company key of a member an older pcsync made.
func claimLabels(r *Record, c *config.Company) map[string]any {
	out := map[string]any{LabelPool: nil, LabelPoolOwner: nil, agentpod.LegacyLabelCompany: nil}
	for k, v := range podLabels(r, c) {
		out[k] = v
	}
	return out
}
