package leasepod

import (
	"crypto/rand"
	"encoding/hex"
	"path"
	"time"
)

// Record is what the journal keeps of a lease: one pod in a tenant
// namespace.
type Record struct {
	// ID is the provider lease id Paperclip keeps, and the pod's name.
	ID        string `json:"id"`
	Namespace string `json:"namespace"`
	// Company is the pcsync company slug.
	Company string `json:"company"`
	// PodUID is the created pod's UID (empty until the create answered).
	PodUID string `json:"podUid,omitempty"`
	// Image is the image the pod runs.
	Image string `json:"image"`
	// AdapterType is Paperclip's adapter type of the run.
	AdapterType string `json:"adapterType,omitempty"`
	// Paperclip ids, for labels and logs.
	CompanyID     string `json:"companyId,omitempty"`
	EnvironmentID string `json:"environmentId,omitempty"`
	RunID         string `json:"runId,omitempty"`
	AgentID       string `json:"agentId,omitempty"`
	// Agent is the agent declared in Git that AgentID is, whose scheduling
	// the pod has (podsched); empty: the company's defaults.
	Agent string `json:"agent,omitempty"`
	// ExpiresAt is when the lease ends at the latest: its pod is deleted
	// then, by the daemon, and stopped by the kubelet (activeDeadlineSeconds).
	ExpiresAt time.Time `json:"expiresAt"`
	CreatedAt time.Time `json:"createdAt"`
	// Paths of the lease as its commands see them.
	Workspace string `json:"workspace"`
	Home      string `json:"home"`
	Tmp       string `json:"tmp"`
	Socket    string `json:"socket"`
	// Server is the pcsync binary in the image (pcsync's own images,
	// images.ServerPath): the pod needs no helper container. Empty: the
	// postStart hook of a helper container of HelperImage copies it to
	// DefaultServerPath, and the daemon execs sandbox.Options.ServerPath.
	Server string `json:"server,omitempty"`
	// HelperImage is the helper container's image when Server is empty.
	HelperImage string `json:"helperImage,omitempty"`
	// Prestarted says the lease was begun for its run before Paperclip
	// asked for it (sandbox.Manager.Prestart), and no acquire has taken it
	// yet: a daemon that finds it so in its journal at start deletes its
	// pod.
	Prestarted bool `json:"prestarted,omitempty"`
	// Keep, when set, is the storage that keeps the lease's workspace and
	// HOME while it is suspended: a claim named as the lease, which every
	// pod of the lease mounts (claim.go).
	Keep *Keep `json:"keep,omitempty"`
	// Suspended says the lease's pod was deleted and its claim kept: the
	// next execute or resume creates its pod again.
	Suspended bool `json:"suspended,omitempty"`
}

// Keep is a kept lease's storage and idle time (Company
// spec.sandbox.suspend, as it was at the acquire).
type Keep struct {
	// IdleSec is how long the lease keeps its pod with no execute.
	IdleSec int `json:"idleSec"`
	// Size is the claim's storage request.
	Size string `json:"size"`
	// StorageClassName is the claim's StorageClass; empty: the cluster's
	// default.
	StorageClassName string `json:"storageClassName,omitempty"`
}

// NewID returns a fresh pod name: "pcsync-sbx-" and 10 hex digits.
func NewID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "pcsync-sbx-" + hex.EncodeToString(b[:])
}

// SetPaths fills the lease's paths: the pod's own, or under hostRoot/<id>
// when pods share the host.
func (l *Record) SetPaths(hostRoot string) {
	if hostRoot == "" {
		l.Workspace, l.Home, l.Tmp, l.Socket = PodWorkspace, PodHome, "/tmp", path.Join(PodRunDir, "cmd.sock")
		return
	}
	root := path.Join(hostRoot, l.ID)
	l.Workspace, l.Home, l.Tmp, l.Socket = path.Join(root, "workspace"), path.Join(root, "home"), path.Join(root, "tmp"), path.Join(root, "run", "cmd.sock")
}

// Paths inside a lease pod.
const (
	PodWorkspace = "/workspace"
	PodHome      = "/home/agent"
	PodRunDir    = "/run/pcsync"
	PodBinDir    = "/opt/pcsync/bin"
	// ContainerName is the lease pod's main container.
	ContainerName = "sandbox"
)

// DefaultServerPath is where the helper container puts pcsync in a pod.
const DefaultServerPath = PodBinDir + "/pcsync"
