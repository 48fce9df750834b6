package testnet

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/pcsync/pcsync/internal/lib/safefile"
)

// MetadataAddress is the cloud metadata address. It is never bound, routed or
// probed by a test: the machine's own services use it. Use MetadataStandIn.
const MetadataAddress = "169.254.169.254"

// Stand-in addresses a test commonly gives a namespace.
const (
	// PublicAddress plays a public host (TEST-NET-3, never routed on the internet).
	PublicAddress = "203.0.113.10"
	// AllowedAddress plays a host in an allowCidrs range (TEST-NET-2).
	AllowedAddress = "198.51.100.10"
	// MetadataStandIn is a link-local address that plays the metadata service.
	MetadataStandIn = "169.254.77.77"
)

// Options configure a Net. The zero value of every field means its default.
type Options struct {
	// Name is the network namespace's name under /run/netns (default
	// "pcsync-tn-" and 8 random hex digits).
	Name string
	// Addrs are the IPv4 addresses the namespace holds, each a /32 routed from the
	// host through the veth (default PublicAddress, AllowedAddress and
	// MetadataStandIn). MetadataAddress is refused.
	Addrs []string
	// LinkPrefix is the /30 of the veth pair: the host end holds its first address,
	// the namespace end its second and routes everything back through the host end
	// (default "10.202.0.0/30").
	LinkPrefix string
}

// DefaultOptions returns Options with every default filled in (a new random Name).
func DefaultOptions() Options {
	return Options{
		Name:       "pcsync-tn-" + randomHex(4),
		Addrs:      []string{PublicAddress, AllowedAddress, MetadataStandIn},
		LinkPrefix: "10.202.0.0/30",
	}
}

func (o *Options) complete() {
	d := DefaultOptions()
	o.Name = cmp.Or(o.Name, d.Name)
	if len(o.Addrs) == 0 {
		o.Addrs = d.Addrs
	}
	o.LinkPrefix = cmp.Or(o.LinkPrefix, d.LinkPrefix)
}

// Net is one network namespace with its veth pair and routes.
type Net struct {
	opts             Options
	ipBin            string
	hostLink, nsLink string
	hostAddr, nsAddr netip.Addr
	addrs            []netip.Addr
	mu               sync.Mutex
	forward          map[string]string // interface → its forwarding value before Forward
	closeOnce        sync.Once
	closeErr         error
	lock             *safefile.Lock // the machine's one Net at a time (LockPath)
}

// LockPath is the machine-wide lock a Net holds from New to Close: every Net
// routes the same default addresses (and the same link prefix) from the
// host, so two at once, in two test binaries, would clash on their routes.
const LockPath = "/run/pcsync-testnet.lock"

// lockWait bounds how long New waits for another process's Net to close.
const lockWait = 15 * time.Minute

// New creates the namespace, the veth pair, the addresses and the host's routes.
// On error, whatever was created is removed.
func New(ctx context.Context, opts Options) (_ *Net, err error) {
	opts.complete()
	n := &Net{opts: opts, forward: map[string]string{}}
	if n.ipBin, err = lookIP(); err != nil {
		return nil, err
	}
	if err := n.parse(); err != nil {
		return nil, err
	}
	if n.lock, err = safefile.LockWait(LockPath, 0o600, lockWait, 100*time.Millisecond); err != nil {
		return nil, fmt.Errorf("testnet: waiting for another test's network namespace to go (%s): %w", LockPath, err)
	}
	if err := n.sweep(ctx); err != nil {
		n.lock.Unlock()
		return nil, err
	}
	suffix := randomHex(4)
	n.hostLink, n.nsLink = "ptn"+suffix+"h", "ptn"+suffix+"n"
	if err := n.ip(ctx, "netns", "add", opts.Name); err != nil {
		n.lock.Unlock()
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Close())
		}
	}()
	bits := netip.MustParsePrefix(opts.LinkPrefix).Bits()
	steps := [][]string{
		{"link", "add", n.hostLink, "type", "veth", "peer", "name", n.nsLink, "netns", opts.Name},
		{"addr", "add", fmt.Sprintf("%s/%d", n.hostAddr, bits), "dev", n.hostLink},
		{"link", "set", n.hostLink, "up"},
		{"-n", opts.Name, "link", "set", "lo", "up"},
		{"-n", opts.Name, "addr", "add", fmt.Sprintf("%s/%d", n.nsAddr, bits), "dev", n.nsLink},
		{"-n", opts.Name, "link", "set", n.nsLink, "up"},
		{"-n", opts.Name, "route", "add", "default", "via", n.hostAddr.String(), "dev", n.nsLink},
	}
	for _, a := range n.addrs {
		steps = append(steps,
			[]string{"-n", opts.Name, "addr", "add", a.String() + "/32", "dev", n.nsLink},
			[]string{"route", "add", a.String() + "/32", "via", n.nsAddr.String(), "dev", n.hostLink})
	}
	for _, s := range steps {
		if err := n.ip(ctx, s...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// sweep removes the namespaces of Nets whose process ended without Close
// (killed): with LockPath held, no live Net has one. Their veth pairs and
// host routes go with them; left, they would refuse this Net's routes
// ("File exists").
func (n *Net) sweep(ctx context.Context) error {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("testnet: sweep: %w", err)
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "pcsync-tn-") {
			if err := n.ip(ctx, "netns", "del", name); err != nil {
				return fmt.Errorf("testnet: sweep a killed test's namespace: %w", err)
			}
		}
	}
	return nil
}

// parse checks the options' addresses.
func (n *Net) parse() error {
	pfx, err := netip.ParsePrefix(n.opts.LinkPrefix)
	if err != nil || !pfx.Addr().Is4() || pfx.Bits() > 30 {
		return fmt.Errorf("testnet: link prefix %q: want an IPv4 prefix of /30 or wider", n.opts.LinkPrefix)
	}
	n.hostAddr = pfx.Masked().Addr().Next()
	n.nsAddr = n.hostAddr.Next()
	for _, s := range n.opts.Addrs {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return fmt.Errorf("testnet: address %q: want IPv4", s)
		}
		if s == MetadataAddress {
			return fmt.Errorf("testnet: address %s is the machine's real metadata service: use another 169.254.0.0/16 address such as %s", s, MetadataStandIn)
		}
		n.addrs = append(n.addrs, a)
	}
	return nil
}

// Name returns the namespace's name.
func (n *Net) Name() string { return n.opts.Name }

// HostLink returns the host end of the veth pair: every target routes through it.
func (n *Net) HostLink() string { return n.hostLink }

// HostAddr returns the host end's address, the namespace's way back to the host.
func (n *Net) HostAddr() string { return n.hostAddr.String() }

// Addrs returns the addresses the namespace holds.
func (n *Net) Addrs() []string {
	out := make([]string, len(n.addrs))
	for i, a := range n.addrs {
		out[i] = a.String()
	}
	return out
}

// ip runs `ip args…`.
func (n *Net) ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, n.ipBin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("testnet %s: ip %s: %w: %s", n.opts.Name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Close restores the forwarding it changed and removes the namespace (the veth
// pair and the host's routes through it go with it). Safe to call more than once.
func (n *Net) Close() error {
	n.closeOnce.Do(func() {
		errs := []error{n.restoreForward()}
		if _, err := os.Stat(filepath.Join("/run/netns", n.opts.Name)); err == nil {
			if out, err := exec.Command(n.ipBin, "netns", "del", n.opts.Name).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("testnet %s: ip netns del: %w: %s", n.opts.Name, err, strings.TrimSpace(string(out))))
			}
		}
		if n.hostLink != "" {
			if _, err := os.Stat(filepath.Join("/sys/class/net", n.hostLink)); err == nil {
				// The namespace's deletion takes its veth end, and the kernel
				// then removes this peer on its own: gone by now (or between
				// the Stat and the del) is no error.
				if out, err := exec.Command(n.ipBin, "link", "del", n.hostLink).CombinedOutput(); err != nil &&
					!strings.Contains(string(out), "Cannot find device") && !strings.Contains(string(out), "No such device") {
					errs = append(errs, fmt.Errorf("testnet %s: ip link del %s: %w: %s", n.opts.Name, n.hostLink, err, strings.TrimSpace(string(out))))
				}
			}
		}
		n.closeErr = errors.Join(errs...)
		if n.lock != nil {
			n.lock.Unlock()
		}
	})
	return n.closeErr
}

// lookIP finds the ip program.
func lookIP() (string, error) {
	for _, p := range []string{"ip", "/usr/sbin/ip", "/sbin/ip"} {
		if bin, err := exec.LookPath(p); err == nil {
			return bin, nil
		}
	}
	return "", errors.New("testnet: ip not found (apt-get install iproute2)")
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
