package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// MetricsText returns the API server's /metrics (Prometheus text format), read with
// the admin client.
func (c *Cluster) MetricsText(ctx context.Context) (string, error) {
	body, err := c.client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("testcluster: metrics: %w", err)
	}
	return string(body), nil
}

// RequestCount is one series of the API server's apiserver_request_total counter.
type RequestCount struct {
	Verb        string // e.g. GET, LIST, WATCH, POST, PUT, PATCH, DELETE, APPLY
	Group       string
	Version     string
	Resource    string
	Subresource string
	Scope       string // cluster, namespace, resource
	Code        string // HTTP status code
	Count       float64
}

// Mutating reports whether the request could change state.
func (r RequestCount) Mutating() bool {
	switch r.Verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY":
		return true
	}
	return false
}

// RequestCounts parses apiserver_request_total from MetricsText. The counters cover
// every client (controllers, scheduler, kwok included) and never decrease: compare
// two snapshots, or use AuditEvents to see who made a request.
func (c *Cluster) RequestCounts(ctx context.Context) ([]RequestCount, error) {
	text, err := c.MetricsText(ctx)
	if err != nil {
		return nil, err
	}
	return parseRequestCounts(text)
}

func parseRequestCounts(text string) ([]RequestCount, error) {
	const name = "apiserver_request_total{"
	var out []RequestCount
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		labels, rest, err := parseLabels(line[len(name):])
		if err != nil {
			return nil, fmt.Errorf("testcluster: metrics line %q: %w", line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("testcluster: metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("testcluster: metrics line %q: %w", line, err)
		}
		out = append(out, RequestCount{
			Verb: labels["verb"], Group: labels["group"], Version: labels["version"],
			Resource: labels["resource"], Subresource: labels["subresource"],
			Scope: labels["scope"], Code: labels["code"], Count: v,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("testcluster: metrics: %w", err)
	}
	return out, nil
}

// parseLabels reads `k="v",k2="v2"}` and returns the labels and what follows '}'.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	i := 0
	for {
		if i >= len(s) {
			return nil, "", fmt.Errorf("unterminated label set")
		}
		if s[i] == '}' {
			return labels, s[i+1:], nil
		}
		if s[i] == ',' {
			i++
			continue
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 || i+eq+1 >= len(s) || s[i+eq+1] != '"' {
			return nil, "", fmt.Errorf("bad label at %q", s[i:])
		}
		key := s[i : i+eq]
		j := i + eq + 2
		var val strings.Builder
		for ; j < len(s) && s[j] != '"'; j++ {
			if s[j] == '\\' && j+1 < len(s) {
				j++
				switch s[j] {
				case 'n':
					val.WriteByte('\n')
				default:
					val.WriteByte(s[j])
				}
				continue
			}
			val.WriteByte(s[j])
		}
		if j >= len(s) {
			return nil, "", fmt.Errorf("unterminated value of %s", key)
		}
		labels[key] = val.String()
		i = j + 1
	}
}

// AuditEvent is one entry of the API server's audit log, which records every request
// except get, list and watch (at Metadata level: no bodies).
type AuditEvent struct {
	Stage      string    `json:"stage"`
	Verb       string    `json:"verb"` // create, update, patch, delete, deletecollection
	RequestURI string    `json:"requestURI"`
	UserAgent  string    `json:"userAgent"`
	User       AuditUser `json:"user"`
	ObjectRef  *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// AuditUser is the authenticated user of an AuditEvent.
type AuditUser struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups"`
}

// AuditEvents returns the audit log's completed requests (stage ResponseComplete)
// for which keep returns true (nil keeps all). The log is written before the API
// server answers, so a request that has returned is in it. It needs the cluster's
// files: a cluster started by this package, in this or another process on this
// machine.
func (c *Cluster) AuditEvents(keep func(AuditEvent) bool) ([]AuditEvent, error) {
	if c.info.AuditLogPath == "" {
		return nil, fmt.Errorf("testcluster: audit log: unknown for this cluster")
	}
	f, err := os.Open(c.info.AuditLogPath)
	if err != nil {
		return nil, fmt.Errorf("testcluster: audit log: %w", err)
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			continue // a line being written right now
		}
		if ev.Stage != "ResponseComplete" {
			continue
		}
		if keep == nil || keep(ev) {
			out = append(out, ev)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("testcluster: audit log: %w", err)
	}
	return out, nil
}

// AuditLogPath is the API server's audit log (JSON lines), empty when unknown.
func (c *Cluster) AuditLogPath() string { return c.info.AuditLogPath }
