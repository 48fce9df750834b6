package hookapi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/pcsync/pcsync/pkg/sandbox"
)

// The workspace sync's routes: the plugin's onEnvironmentSyncIn and
// onEnvironmentSyncOut read and write the Paperclip host's paths and move
// each mapping's bytes over the socket, raw, in one request. The bytes
// stream between the request and the lease's command stream: the daemon
// holds none of them.
//
//	POST /v1/sync/put  body: one line of SyncPutRequest JSON, "\n", then the
//	                   bytes (a file's, or a tar of a tree); answer SyncPutResponse
//	POST /v1/sync/get  body: SyncGetRequest JSON; answer the bytes
//	                   (application/octet-stream, chunked, as they come)
//
// A refusal is a non-2xx ErrorResponse, as for the hooks. A get that fails
// once its bytes began to go out has its connection cut (the answer ends
// without its last chunk). Paths travel in the body, never in the URL.

// SyncPutRequest is the head of a put: where its bytes go in the lease's
// pod.
type SyncPutRequest struct {
	Lease LeaseRef `json:"lease"`
	// TargetPath is an absolute POSIX path in the pod.
	TargetPath string           `json:"targetPath"`
	Kind       sandbox.SyncKind `json:"kind"`
	// Mode is the target's permission bits; null for the default.
	Mode      *uint32 `json:"mode"`
	TimeoutMs int64   `json:"timeoutMs"`
}

// SyncPutResponse says how many bytes a put's body had after its head.
type SyncPutResponse struct {
	Bytes int `json:"bytes"`
}

// SyncGetRequest is what a get reads from the lease's pod.
type SyncGetRequest struct {
	Lease LeaseRef `json:"lease"`
	// SourcePath is an absolute POSIX path in the pod.
	SourcePath     string           `json:"sourcePath"`
	Kind           sandbox.SyncKind `json:"kind"`
	Exclude        []string         `json:"exclude"`
	FollowSymlinks bool             `json:"followSymlinks"`
	TimeoutMs      int64            `json:"timeoutMs"`
}

// maxSyncHead bounds the JSON line of a put.
const maxSyncHead = 1 << 20

func (a *API) syncPut(w http.ResponseWriter, r *http.Request) {
	body := bufio.NewReaderSize(http.MaxBytesReader(w, r.Body, sandbox.MaxSyncBytes+maxSyncHead), 64<<10)
	head, err := readHead(body)
	if err != nil {
		refuse(w, &sandbox.BadRequestError{Err: err})
		return
	}
	var req SyncPutRequest
	if err := decode(head, &req); err != nil {
		refuse(w, err)
		return
	}
	n, err := a.m.Put(r.Context(), sandbox.PutParams{LeaseID: req.Lease.ID(), Target: req.TargetPath, Kind: req.Kind,
		Data: body, Mode: req.Mode, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond})
	// The body is read to its end before the answer (a tar's command may
	// end before its trailing blocks; a failed one at any point), so that
	// the plugin, still writing it, reads the answer rather than a reset.
	rest, _ := io.Copy(io.Discard, body)
	if err != nil {
		refuse(w, err)
		return
	}
	reply(w, SyncPutResponse{Bytes: int(n + rest)})
}

// readHead reads a put's JSON line (without its "\n").
func readHead(r *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		chunk, err := r.ReadSlice('\n')
		head = append(head, chunk...)
		switch {
		case err == nil:
			return head[:len(head)-1], nil
		case errors.Is(err, bufio.ErrBufferFull) && len(head) < maxSyncHead:
			continue
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, fmt.Errorf("the head line is longer than %d bytes", maxSyncHead)
		case errors.Is(err, io.EOF):
			return nil, errors.New("no head line: the body ended before its first \"\\n\"")
		default:
			return nil, err
		}
	}
}

func (a *API) syncGet(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSyncHead))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, sandbox.CodeBadRequest, "request body: "+err.Error())
		return
	}
	var req SyncGetRequest
	if err := decode(body, &req); err != nil {
		refuse(w, err)
		return
	}
	out := &lazyOK{w: w}
	_, err = a.m.Get(r.Context(), sandbox.GetParams{LeaseID: req.Lease.ID(), Source: req.SourcePath, Kind: req.Kind,
		Exclude: req.Exclude, FollowSymlinks: req.FollowSymlinks, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond}, out)
	switch {
	case err != nil && !out.started:
		refuse(w, err)
	case err != nil:
		// The answer's 200 and some bytes are out: cut the connection, so
		// that the plugin sees the answer cut off rather than whole.
		a.log.Warn("sandbox: sync get failed while its bytes went out", slog.String("lease", req.Lease.ID()),
			slog.String("source", req.SourcePath), slog.Any("error", err))
		panic(http.ErrAbortHandler)
	case !out.started:
		w.Header().Set("Content-Length", "0")
		out.start()
	}
}

// lazyOK answers 200 with a get's bytes once the first of them comes, so
// that a get that fails before any byte is refused as any request is.
type lazyOK struct {
	w       http.ResponseWriter
	started bool
}

func (o *lazyOK) start() {
	o.started = true
	o.w.Header().Set("Content-Type", "application/octet-stream")
	o.w.WriteHeader(http.StatusOK)
}

func (o *lazyOK) Write(p []byte) (int, error) {
	if !o.started {
		o.start()
	}
	return o.w.Write(p)
}
