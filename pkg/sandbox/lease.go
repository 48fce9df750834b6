package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"path"
	"sync"
	"time"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
)

// LeaseState is where a lease is in its life.
type LeaseState string

// The lease states, in order.
const (
	// LeasePending: recorded, its pod created, not yet answering.
	LeasePending LeaseState = "Pending"
	// LeaseReady: the pod runs and its command server answers.
	LeaseReady LeaseState = "Ready"
	// LeaseReleasing: release or destroy has begun; no new executes.
	LeaseReleasing LeaseState = "Releasing"
	// LeaseGone: the pod is deleted and gone.
	LeaseGone LeaseState = "Gone"
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
	// images.ServerPath): the pod needs no init container. Empty: an init
	// container of HelperImage copies it to DefaultServerPath, and the
	// daemon execs Options.ServerPath.
	Server string `json:"server,omitempty"`
	// HelperImage is the init container's image when Server is empty.
	HelperImage string `json:"helperImage,omitempty"`
}

// lease is a live lease: its record and what the daemon holds for it.
type lease struct {
	Record

	mu      sync.Mutex
	state   LeaseState
	client  *cmdclient.Client
	cmu     sync.Mutex // held while the command stream is opened
	rule    EnvRule
	warned  map[string]bool
	running int
	ending  bool // the end (releaseAsync) has begun
	// held: counted in the metrics' leases held (from track to the end).
	held bool
	// shuttingDown: the end opens a stream of its own to stop the server.
	shuttingDown bool
	idle         chan struct{} // closed when running drops to 0 while releasing
	released     chan struct{} // closed once the pod is gone
	endErr       string        // why the end failed, once released is closed
	expiry       *time.Timer
}

// newLeaseID returns a fresh pod name: "pcsync-sbx-" and 10 hex digits.
func newLeaseID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "pcsync-sbx-" + hex.EncodeToString(b[:])
}

// setPaths fills the lease's paths: the pod's own, or under hostRoot/<id>
// when pods share the host.
func (l *Record) setPaths(hostRoot string) {
	if hostRoot == "" {
		l.Workspace, l.Home, l.Tmp, l.Socket = PodWorkspace, PodHome, "/tmp", path.Join(PodRunDir, "cmd.sock")
		return
	}
	root := path.Join(hostRoot, l.ID)
	l.Workspace, l.Home, l.Tmp, l.Socket = path.Join(root, "workspace"), path.Join(root, "home"), path.Join(root, "tmp"), path.Join(root, "run", "cmd.sock")
}

// State returns the lease's state.
func (l *lease) State() LeaseState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

func (l *lease) setState(s LeaseState) {
	l.mu.Lock()
	l.state = s
	l.mu.Unlock()
}

// pcsyncAdapter maps Paperclip's adapter type to pcsync's, whose image and
// env keys the lease uses; ok is false for a type pcsync does not know.
func pcsyncAdapter(paperclipType string) (adapters.Type, bool) {
	if paperclipType == "cursor" {
		return adapters.CursorLocal, true
	}
	t := adapters.Type(paperclipType)
	for _, k := range adapters.Types() {
		if k == t {
			return t, true
		}
	}
	return "", false
}
