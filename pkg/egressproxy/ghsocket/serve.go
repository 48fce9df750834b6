package ghsocket

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// The variables a Forwarder is set up from (package agentenv sets them).
const (
	// EnvRoute holds the GitHub credential's route on the proxy,
	// http://<proxy>:3128/credentials/<name>/: set, a Forwarder is started.
	EnvRoute = "PCSYNC_GITHUB_ROUTE"
	// EnvConfigDir is gh's config directory, where the socket and gh's
	// config.yml go.
	EnvConfigDir = "GH_CONFIG_DIR"
	// EnvHost is gh's host: unset for github.com, an Enterprise Server's.
	EnvHost = "GH_HOST"
	// EnvToken is the run's token, which gh sends and the Forwarder
	// puts in the route's Authorization.
	EnvToken = "GH_TOKEN"
)

// DefaultDir is the config directory agentenv gives: under /tmp, which is
// an emptyDir in a Job's pod and in a lease's alike (the root file system
// is read-only).
const DefaultDir = "/tmp/pcsync-gh"

// The names in the config directory.
const (
	SocketName = "http.sock"
	ConfigName = "config.yml"
)

// Options configure Start.
type Options struct {
	Target
	// Dir is gh's config directory: made 0700 if missing; the socket and
	// config.yml (http_unix_socket naming it) go in it.
	Dir string
	// Logger receives the requests that fail; nil: discarded.
	Logger *slog.Logger
}

// FromEnv returns the Options that env (KEY=VALUE, as os.Environ) gives,
// false when it names no route; an error names the variable that is
// missing or bad.
func FromEnv(env []string) (Options, bool, error) {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	if vars[EnvRoute] == "" {
		return Options{}, false, nil
	}
	u, err := url.Parse(vars[EnvRoute])
	if err != nil {
		return Options{}, true, fmt.Errorf("ghsocket: %s: %w", EnvRoute, err)
	}
	o := Options{Target: Target{Route: u, Host: cmp.Or(vars[EnvHost], "github.com"), Token: vars[EnvToken]}, Dir: vars[EnvConfigDir]}
	switch {
	case o.Dir == "":
		return o, true, fmt.Errorf("ghsocket: %s is set but %s is not", EnvRoute, EnvConfigDir)
	case o.Token == "":
		return o, true, fmt.Errorf("ghsocket: %s is set but %s is not", EnvRoute, EnvToken)
	}
	return o, true, o.check()
}

// ErrServed is Start's error when another process serves the socket: a
// lease's command server, whose commands may run pcsync init (its wait for
// the proxy) with the same env.
var ErrServed = errors.New("ghsocket: another process serves the socket")

// Server is a Forwarder serving on its socket.
type Server struct {
	*Forwarder
	// Socket is the socket's path.
	Socket string
	srv    *http.Server
	done   chan struct{}
}

// Start listens on Dir/http.sock (0600; a stale socket is replaced, one
// that answers is left to its server: ErrServed), writes gh's config.yml
// naming it in Dir, and serves until ctx ends or Close.
func Start(ctx context.Context, opts Options) (*Server, error) {
	f, err := NewForwarder(opts.Target)
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("ghsocket: no config directory")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ghsocket: %w", err)
	}
	sock := filepath.Join(opts.Dir, SocketName)
	if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
		_ = c.Close()
		return nil, fmt.Errorf("%w: %s", ErrServed, sock)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("ghsocket: stale socket: %w", err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("ghsocket: %w", err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("ghsocket: %w", err)
	}
	// version 1: gh's multi-account migration is done, so gh never
	// rewrites the file.
	conf := fmt.Sprintf("version: \"1\"\nhttp_unix_socket: %s\n", sock)
	if err := safefile.WriteAtomic(filepath.Join(opts.Dir, ConfigName), []byte(conf), 0o600, false); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("ghsocket: gh's config: %w", err)
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{Forwarder: f, Socket: sock, done: make(chan struct{}),
		srv: &http.Server{Handler: f, ReadHeaderTimeout: time.Minute, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s, nil
}

// Close stops serving and removes the socket.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	_ = os.Remove(s.Socket)
	return err
}

// Starter starts a Forwarder for a process that runs many commands (a
// lease's command server): on the first environment that names a route,
// one per config directory, its target kept to the latest environment's.
type Starter struct {
	ctx     context.Context
	logger  *slog.Logger
	mu      sync.Mutex
	servers map[string]*Server
}

// NewStarter returns a Starter whose Forwarders serve until ctx ends.
func NewStarter(ctx context.Context, logger *slog.Logger) *Starter {
	return &Starter{ctx: ctx, logger: logger, servers: map[string]*Server{}}
}

// Ensure starts (or updates) the Forwarder that env names, if any.
func (s *Starter) Ensure(env []string) error {
	opts, ok, err := FromEnv(env)
	if !ok || err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if srv := s.servers[opts.Dir]; srv != nil {
		return srv.Set(opts.Target)
	}
	opts.Logger = s.logger
	srv, err := Start(s.ctx, opts)
	if errors.Is(err, ErrServed) {
		// Another process's: taken over once it is gone.
		return nil
	}
	if err != nil {
		return err
	}
	s.servers[opts.Dir] = srv
	if s.logger != nil {
		s.logger.Info("the GitHub CLI's socket serves", "socket", srv.Socket, "host", opts.Host, "route", opts.Route.Redacted())
	}
	return nil
}
