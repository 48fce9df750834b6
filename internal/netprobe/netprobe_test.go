package netprobe

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fullListener returns the address of a loopback socket that listens with a
// backlog of 0 and never accepts, its queue already full: the kernel drops
// the next SYN, and a connection to it times out, as behind a policy's DROP.
func fullListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	// Fill the accept queue (backlog 0 holds one): these connect.
	for i := 0; i < 4; i++ {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	return addr
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestProbe: a listener connects, a closed port is refused, a listener
// whose queue is full times out, a malformed target is an error; the order
// is the order given.
func TestProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	full1, full2 := fullListener(t), fullListener(t)
	targets := []string{l.Addr().String(), closedPort(t), full1, full2, "no-port"}
	r := Probe(context.Background(), targets, Options{Timeout: 700 * time.Millisecond})
	var got []Outcome
	for i, res := range r.Results {
		if res.Target != targets[i] {
			t.Errorf("result %d is for %s, want %s", i, res.Target, targets[i])
		}
		if (res.Outcome == Connected) != (res.Detail == "") || res.Attempts != 1 || res.Connected != map[bool]int{true: 1}[res.Outcome == Connected] {
			t.Errorf("result %d: %+v", i, res)
		}
		got = append(got, res.Outcome)
	}
	want := []Outcome{Connected, Refused, TimedOut, TimedOut, Failed}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("outcomes (-want +got):\n%s\n%+v", d, r.Results)
	}
}

// TestProbeAttempts: a target is tried Attempts times and takes its last
// outcome: a listener that closes after the first attempt connected once
// and is refused in the end (as a pod's rules that arrive late); a
// malformed target is tried once.
func TestProbeAttempts(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	go func() {
		c, err := l.Accept()
		if err == nil {
			_ = c.Close()
		}
		_ = l.Close() // the next attempts are refused
	}()
	r := Probe(context.Background(), []string{addr, "no-port"}, Options{Timeout: time.Second, Attempts: 3, Interval: 100 * time.Millisecond})
	type got struct {
		Outcome             Outcome
		Attempts, Connected int
	}
	var gots []got
	for _, res := range r.Results {
		gots = append(gots, got{res.Outcome, res.Attempts, res.Connected})
	}
	want := []got{{Refused, 3, 1}, {Failed, 1, 0}}
	if d := cmp.Diff(want, gots); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestBlocked: refused, timed out and unreachable are what a policy gives;
// connected and error are not.
func TestBlocked(t *testing.T) {
	got := map[Outcome]bool{}
	for _, o := range []Outcome{Connected, Refused, TimedOut, Unreachable, Failed} {
		got[o] = o.Blocked()
	}
	want := map[Outcome]bool{Connected: false, Refused: true, TimedOut: true, Unreachable: true, Failed: false}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}

// TestParse: a report round-trips, the last report line of a log wins, and
// what holds none is an error that quotes it.
func TestParse(t *testing.T) {
	r := Report{Version: Version, Results: []Result{{Target: "10.0.0.1:10250", Outcome: Refused, Millis: 3, Detail: "connection refused"}}}
	for _, tc := range []struct {
		name, in string
		want     *Report
	}{
		{"message", string(r.Encode()), &r},
		{"log", "starting\n" + `{"v":1,"results":[]}` + "\n" + string(r.Encode()) + "\n", &r},
		{"empty", "", nil},
		{"other version", `{"v":2,"results":[]}`, nil},
		{"garbage", "exec format error", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.in)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("Parse(%q) = %+v, want an error", tc.in, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(*tc.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}
