package cmdserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Attach relays Stdin to the server's socket and the socket to Stdout. It
// returns nil when the server closes (or resets) the connection, even if Stdin never
// ends (a kwok exec never sees stdin EOF); when Stdin ends first, it
// half-closes the socket and waits for the server to close. It returns an
// error when it cannot connect (or spawn) or ctx ends first.
func Attach(ctx context.Context, opts AttachOptions) error {
	if opts.Socket == "" {
		return errors.New("cmdserver: no socket path")
	}
	opts.complete()
	nc, err := dial(ctx, opts.Socket)
	if err != nil && opts.Spawn && noServer(err) {
		nc, err = spawnAndDial(ctx, opts)
	}
	if err != nil {
		return fmt.Errorf("cmdserver: attach %s: %w", opts.Socket, err)
	}
	uc := nc.(*net.UnixConn)
	stop := context.AfterFunc(ctx, func() { uc.Close() })
	defer stop()
	defer uc.Close()

	go func() {
		if _, err := io.Copy(uc, opts.Stdin); err == nil {
			_ = uc.CloseWrite() // a socket already closed has nothing to end
		} else {
			uc.Close()
		}
	}()
	_, err = io.Copy(opts.Stdout, uc)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// A reset is the server closing too: it closes (after Shutdown, say)
	// while the client's last bytes are still unread in its socket, and the
	// kernel answers them with RST instead of FIN. EPIPE is the client gone.
	// Either way the stream has ended and there is nothing left to relay.
	if err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("cmdserver: relay: %w", err)
	}
	return nil
}

func dial(ctx context.Context, socket string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", socket)
}

// noServer says a dial error means nothing listens on the socket.
func noServer(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// spawnAndDial starts a detached server and dials until its socket answers.
func spawnAndDial(ctx context.Context, opts AttachOptions) (net.Conn, error) {
	argv := opts.SpawnArgv
	if argv == nil {
		argv = []string{os.Args[0], "sandbox-server", "serve", "--socket", opts.Socket,
			"--owner-pid", strconv.Itoa(os.Getppid())}
	}
	if err := spawn(argv, opts.Socket+".log"); err != nil {
		return nil, err
	}
	opts.Logger.Info("spawned command server", slog.String("socket", opts.Socket))
	wait := opts.SpawnWait
	deadline := time.Now().Add(wait)
	for {
		nc, err := dial(ctx, opts.Socket)
		if err == nil || !noServer(err) || time.Now().After(deadline) {
			if err != nil {
				err = fmt.Errorf("spawned server not listening after %v: %w", wait, err)
			}
			return nc, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// spawn starts argv in a new session, stdin /dev/null, stdout and stderr
// appended to logPath, and does not wait for it.
func spawn(argv []string, logPath string) error {
	path := argv[0]
	if p, err := os.Executable(); err == nil && path == os.Args[0] {
		path = p
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		return fmt.Errorf("spawn server: %w", err)
	}
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return fmt.Errorf("spawn server: %w", err)
	}
	defer devnull.Close()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("spawn server: %w", err)
	}
	defer logf.Close()
	p, err := os.StartProcess(path, argv, &os.ProcAttr{
		Files: []*os.File{devnull, logf, logf},
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	if err != nil {
		return fmt.Errorf("spawn server: %w", err)
	}
	return p.Release()
}
