package sandbox

import (
	"context"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/pcsync/pcsync/pkg/sandbox/cmdclient"
	"github.com/pcsync/pcsync/pkg/sandbox/pool"
)

// warmStreams are the command streams the daemon opens to the Ready
// members of its warm pools before any lease claims them, by member UID.
// A lease's stream is one pod exec of `pcsync sandbox-server attach`, a
// process the container runtime starts in the pod: on a real node that
// open costs 100–300 ms, which a lease would otherwise wait for on its
// first execute. A claim takes the member's stream with it; a member that
// goes has its stream closed. An idle stream costs one exec connection per
// member (and per daemon that sees the pools) and nothing in the pod but
// the relay.
type warmStreams struct {
	mu     sync.Mutex
	byUID  map[types.UID]*warmStream
	closed bool
}

// warmStream is one member's stream: done is closed once its open is over,
// with c or err set.
type warmStream struct {
	done   chan struct{}
	cancel context.CancelFunc
	c      *cmdclient.Client
	err    error
}

// warmPingWait bounds the check that a claimed member's stream still
// answers.
const warmPingWait = time.Second

// memberReady opens a stream to pool member pod of pool d, unless one is
// open or opening: in the background, until the manager closes or the
// member goes.
func (m *Manager) memberReady(pod *corev1.Pod, d *pool.Decl) {
	w := &m.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || w.byUID[pod.UID] != nil {
		return
	}
	if w.byUID == nil {
		w.byUID = map[types.UID]*warmStream{}
	}
	ctx, cancel := context.WithTimeout(m.base(), m.opts.ReadyTimeout)
	ws := &warmStream{done: make(chan struct{}), cancel: cancel}
	w.byUID[pod.UID] = ws
	r := d.Rec
	r.ID, r.PodUID = pod.Name, string(pod.UID)
	r.SetPaths(m.opts.HostRoot)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		ws.c, ws.err = m.open(ctx, newLease(r))
		if ws.err != nil {
			m.log.Debug("sandbox: warm pool member: no stream opened ahead of its claim", slog.String("pod", pod.Namespace+"/"+pod.Name), slog.Any("error", ws.err))
		}
		close(ws.done)
	}()
}

// memberGone closes the stream of the member uid, if the daemon holds one
// that no lease took.
func (m *Manager) memberGone(uid types.UID) {
	w := &m.warm
	w.mu.Lock()
	ws := w.byUID[uid]
	delete(w.byUID, uid)
	w.mu.Unlock()
	ws.close()
}

// takeStream hands the stream of member uid to the lease that claims it
// (nil when the daemon opened none); the member no longer owns it.
func (m *Manager) takeStream(uid types.UID) *warmStream {
	w := &m.warm
	w.mu.Lock()
	defer w.mu.Unlock()
	ws := w.byUID[uid]
	delete(w.byUID, uid)
	return ws
}

// closeStreams closes every member's stream; none opens after it.
func (m *Manager) closeStreams() {
	w := &m.warm
	w.mu.Lock()
	w.closed = true
	all := w.byUID
	w.byUID = nil
	w.mu.Unlock()
	for _, ws := range all {
		ws.close()
	}
}

// close stops the open (if it runs) and closes the stream; nil is none.
func (ws *warmStream) close() {
	if ws == nil {
		return
	}
	ws.cancel()
	<-ws.done
	if ws.c != nil {
		_ = ws.c.Close()
	}
}

// client waits for the open and returns the stream if it answers a ping;
// nil (the stream closed) otherwise: the lease then opens its own.
func (ws *warmStream) client(ctx context.Context) *cmdclient.Client {
	select {
	case <-ws.done:
	case <-ctx.Done():
		ws.close()
		return nil
	}
	if ws.c == nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, warmPingWait)
	defer cancel()
	if err := ws.c.Ping(pctx); err != nil {
		_ = ws.c.Close()
		return nil
	}
	return ws.c
}
