package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// The workspace sync's routes: the plugin's onEnvironmentSyncIn and
// onEnvironmentSyncOut read and write the Paperclip host's paths and move
// each mapping's bytes over the socket, raw, in one request:
//
//	POST /v1/sync/put  body: one line of SyncPutRequest JSON, "\n", then the
//	                   bytes (a file's, or a tar of a tree); answer SyncPutResponse
//	POST /v1/sync/get  body: SyncGetRequest JSON; answer the bytes
//	                   (application/octet-stream, with Content-Length)
//
// A refusal is a non-2xx ErrorResponse, as for the hooks. Paths travel in
// the body, never in the URL.

// SyncPutRequest is the head of a put: where its bytes go in the lease's
// pod.
type SyncPutRequest struct {
	Lease LeaseRef `json:"lease"`
	// TargetPath is an absolute POSIX path in the pod.
	TargetPath string   `json:"targetPath"`
	Kind       SyncKind `json:"kind"`
	// Mode is the target's permission bits; null for the default.
	Mode      *uint32 `json:"mode"`
	TimeoutMs int64   `json:"timeoutMs"`
}

// SyncPutResponse says how many bytes a put placed.
type SyncPutResponse struct {
	Bytes int `json:"bytes"`
}

// SyncGetRequest is what a get reads from the lease's pod.
type SyncGetRequest struct {
	Lease LeaseRef `json:"lease"`
	// SourcePath is an absolute POSIX path in the pod.
	SourcePath     string   `json:"sourcePath"`
	Kind           SyncKind `json:"kind"`
	Exclude        []string `json:"exclude"`
	FollowSymlinks bool     `json:"followSymlinks"`
	TimeoutMs      int64    `json:"timeoutMs"`
}

// maxSyncHead bounds the JSON line of a put.
const maxSyncHead = 1 << 20

func (a *API) syncPut(w http.ResponseWriter, r *http.Request) {
	body := bufio.NewReaderSize(http.MaxBytesReader(w, r.Body, MaxSyncBytes+maxSyncHead), 64<<10)
	head, err := readHead(body)
	if err != nil {
		refuse(w, &BadRequestError{Err: err})
		return
	}
	var req SyncPutRequest
	if err := decode(head, &req); err != nil {
		refuse(w, err)
		return
	}
	data, err := io.ReadAll(body)
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, CodeBadRequest, fmt.Sprintf("sync put %s: %v", req.TargetPath, err))
		return
	}
	err = a.m.Put(r.Context(), PutParams{LeaseID: req.Lease.ID(), Target: req.TargetPath, Kind: req.Kind,
		Data: data, Mode: req.Mode, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond})
	if err != nil {
		refuse(w, err)
		return
	}
	reply(w, SyncPutResponse{Bytes: len(data)})
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
		fail(w, http.StatusRequestEntityTooLarge, CodeBadRequest, "request body: "+err.Error())
		return
	}
	var req SyncGetRequest
	if err := decode(body, &req); err != nil {
		refuse(w, err)
		return
	}
	data, err := a.m.Get(r.Context(), GetParams{LeaseID: req.Lease.ID(), Source: req.SourcePath, Kind: req.Kind,
		Exclude: req.Exclude, FollowSymlinks: req.FollowSymlinks, Timeout: time.Duration(req.TimeoutMs) * time.Millisecond})
	if err != nil {
		refuse(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	_, _ = w.Write(data)
}
