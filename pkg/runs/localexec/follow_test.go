package localexec

import (
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/internal/lib/redact"
	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/runs"
)

// followFixture is a run's output files and its log, for the follower.
type followFixture struct {
	t     *testing.T
	run   *runs.Run
	files localFiles
}

func newFollowFixture(t *testing.T) *followFixture {
	dir := t.TempDir()
	x := &followFixture{t: t, run: &runs.Run{Paths: runs.Paths{Spool: dir, Name: "x"}}, files: localFiles{dir: filepath.Join(dir, "state")}}
	if err := os.MkdirAll(x.files.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{x.files.stdout(), x.files.stderr()} {
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// follower opens a follower the way a daemon that starts or adopts the run
// does.
func (x *followFixture) follower() *follower {
	x.t.Helper()
	ad, err := adapters.Get(adapters.ClaudeLocal)
	if err != nil {
		x.t.Fatal(err)
	}
	f, err := newFollower(x.run, x.files, ad.NewParser(adapters.ParserOptions{}), redact.New(), slog.New(slog.DiscardHandler))
	if err != nil {
		x.t.Fatal(err)
	}
	return f
}

// agentWrites appends to the agent's stdout.
func (x *followFixture) agentWrites(s string) {
	x.t.Helper()
	fh, err := os.OpenFile(x.files.stdout(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		x.t.Fatal(err)
	}
}

func (x *followFixture) log() string {
	x.t.Helper()
	b, err := os.ReadFile(x.run.Paths.Log())
	if err != nil {
		x.t.Fatal(err)
	}
	return string(b)
}

// TestFollowerLogHasEachLineOnceAfterAKill: a daemon killed between
// appending output to the run's log and recording how far it got (the
// window TestRestartAdoptsLiveRun hit once in a few runs) leaves the next
// daemon a log longer than its recorded position; the next daemon copies
// from that position again and the log still holds every line once. It
// holds too when the kill came before the first position was recorded, and
// when the log already held an earlier run's lines.
func TestFollowerLogHasEachLineOnceAfterAKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before is in the log before the run starts; recorded is what
		// the killed daemon copied and recorded, unrecorded what it copied
		// and did not record.
		before, recorded, unrecorded string
	}{
		{name: "killed after a recorded copy", recorded: "init\n", unrecorded: "assistant\n"},
		{name: "killed before the first record", unrecorded: "init\nassistant\n"},
		{name: "log of an earlier run", before: "earlier run\n", recorded: "init\n", unrecorded: "assistant\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := newFollowFixture(t)
			if err := os.WriteFile(x.run.Paths.Log(), []byte(tc.before), 0o600); err != nil {
				t.Fatal(err)
			}
			first := x.follower()
			x.agentWrites(tc.recorded)
			if err := first.drain(); err != nil {
				t.Fatal(err)
			}
			// The kill: the output reaches the log, its position never
			// reaches logpos.
			x.agentWrites(tc.unrecorded)
			buf := make([]byte, 1024)
			n, _ := first.stdout.Read(buf)
			first.take(0, buf[:n])
			first.close()

			second := x.follower()
			defer second.close()
			x.agentWrites("result\n")
			if err := second.drain(); err != nil {
				t.Fatal(err)
			}
			second.finish()
			want := tc.before + tc.recorded + tc.unrecorded + "result\n"
			if diff := cmp.Diff(want, x.log()); diff != "" {
				t.Errorf("log (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFollowerReadsAnOlderLogPosition: a run adopted from a daemon that
// recorded 16-byte positions (no log size) continues its log where that
// daemon left it.
func TestFollowerReadsAnOlderLogPosition(t *testing.T) {
	x := newFollowFixture(t)
	x.agentWrites("init\n")
	if err := os.WriteFile(x.run.Paths.Log(), []byte("init\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var p [16]byte
	binary.LittleEndian.PutUint64(p[:8], uint64(len("init\n")))
	if err := os.WriteFile(x.files.logpos(), p[:], 0o600); err != nil {
		t.Fatal(err)
	}
	f := x.follower()
	defer f.close()
	x.agentWrites("result\n")
	if err := f.drain(); err != nil {
		t.Fatal(err)
	}
	f.finish()
	if diff := cmp.Diff("init\nresult\n", x.log()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
