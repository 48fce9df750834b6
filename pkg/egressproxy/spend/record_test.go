package spend_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pcsync/pcsync/pkg/adapters"
	"github.com/pcsync/pcsync/pkg/egressproxy/spend"
)

type mc = map[string]spend.MicroCents

// TestRecordProcesses: what processes of one month count adds up across
// a rollout (two overlapping), a late or repeated report and a process
// that stopped, where keeping the larger of two figures would lose what
// the old process counted after the new one read its base.
func TestRecordProcesses(t *testing.T) {
	type step struct {
		do      func(r *spend.Record)
		base    string // the process whose base is checked after the step
		want    spend.Counts
		wantAll spend.MicroCents
	}
	r := spend.Record{Month: "2026-11"}
	a3 := spend.Counts{Company: 3, Agents: mc{"coder": 3}, Runs: mc{"run1": 3}}
	steps := []step{
		{do: func(r *spend.Record) { r.Observe("2026-11", "A", a3) }, base: "B",
			want: a3, wantAll: 3},
		{do: func(r *spend.Record) {
			r.Observe("2026-11", "B", spend.Counts{Company: 2, Agents: mc{"coder": 2}, Runs: mc{"run2": 2}})
		}, base: "A", want: spend.Counts{Company: 2, Agents: mc{"coder": 2}, Runs: mc{"run2": 2}}, wantAll: 5},
		// A counted 1 more after B read its base.
		{do: func(r *spend.Record) {
			r.Observe("2026-11", "A", spend.Counts{Company: 4, Agents: mc{"coder": 4}, Runs: mc{"run1": 4}})
		}, base: "B", want: spend.Counts{Company: 4, Agents: mc{"coder": 4}, Runs: mc{"run1": 4}}, wantAll: 6},
		// A report of A's read late changes nothing.
		{do: func(r *spend.Record) { r.Observe("2026-11", "A", a3) }, base: "B",
			want: spend.Counts{Company: 4, Agents: mc{"coder": 4}, Runs: mc{"run1": 4}}, wantAll: 6},
		// A's pod is gone: folded, and a new process C starts from all.
		{do: func(r *spend.Record) { r.Close("A"); r.Close("nobody") }, base: "C",
			want: spend.Counts{Company: 6, Agents: mc{"coder": 6}, Runs: mc{"run1": 4, "run2": 2}}, wantAll: 6},
		{do: func(r *spend.Record) { r.Close("B") }, base: "B",
			want: spend.Counts{Company: 6, Agents: mc{"coder": 6}, Runs: mc{"run1": 4, "run2": 2}}, wantAll: 6},
		// run1 ended: its figure goes; the agent's and company's stay.
		{do: func(r *spend.Record) { r.DropRuns(func(run string) bool { return run == "run2" }) }, base: "C",
			want: spend.Counts{Company: 6, Agents: mc{"coder": 6}, Runs: mc{"run2": 2}}, wantAll: 6},
	}
	for i, s := range steps {
		s.do(&r)
		if d := cmp.Diff(s.want, r.Base(s.base), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("step %d: base of %s (-want +got):\n%s", i, s.base, d)
		}
		if got := r.Base("").Company; got != s.wantAll {
			t.Errorf("step %d: month's spend %d, want %d", i, got, s.wantAll)
		}
	}
}

// TestRecordMonth: a report of a later month starts the record again; one
// of an earlier month is dropped.
func TestRecordMonth(t *testing.T) {
	r := spend.Record{Month: "2026-11"}
	r.Observe("2026-11", "A", spend.Counts{Company: 7})
	r.Close("A")
	r.Observe("2026-12", "B", spend.Counts{Company: 1})
	r.Observe("2026-11", "A2", spend.Counts{Company: 9})
	want := spend.Record{Version: spend.RecordVersion, Month: "2026-12", Live: map[string]spend.Counts{"B": {Company: 1}}}
	if d := cmp.Diff(want, r, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("record (-want +got):\n%s", d)
	}
}

// TestRecordEncoding: the record's JSON, read back the same, and bad
// records refused naming what is wrong.
func TestRecordEncoding(t *testing.T) {
	r := spend.Record{Month: "2026-11", Closed: spend.Counts{Company: 2_171_100, Agents: mc{"coder": 2_171_100}},
		Live: map[string]spend.Counts{"p1": {Company: 5, Runs: mc{"0123456789ab": 5}}}}
	raw := r.Encode()
	const want = `{"v":1,"month":"2026-11","closed":{"company":2171100,"agents":{"coder":2171100}},` +
		`"live":{"p1":{"company":5,"runs":{"0123456789ab":5}}}}`
	if string(raw) != want {
		t.Errorf("encoded\n%s\nwant\n%s", raw, want)
	}
	got, err := spend.DecodeRecord(raw)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(r, got); d != "" {
		t.Errorf("decoded (-want +got):\n%s", d)
	}
	for _, tc := range []struct{ raw, err string }{
		{`{"v":2,"month":"2026-11","closed":{"company":0}}`, "spend record: version 2, want 1"},
		{`{"v":1,"month":"2026-13","closed":{"company":0}}`, `spend record: month "2026-13": want YYYY-MM`},
		{`{"v":1,"month":"2026-11","closed":{"company":-1}}`, "spend record: closed.company: negative (-1)"},
		{`{"v":1,"month":"2026-11","closed":{"company":0},"live":{"p1":{"company":1,"agents":{"coder":-4}}}}`,
			"spend record: live.p1.agents.coder: negative (-4)"},
		{`{"v":1,"month":"2026-11","closed":{"company":0},"total":3}`, `spend record: json: unknown field "total"`},
		{`{"v":1,"month":"2026-11","closed":{"company":1.5}}`,
			"spend record: json: cannot unmarshal number 1.5 into Go struct field Counts.closed.company of type spend.MicroCents"},
	} {
		if _, err := spend.DecodeRecord([]byte(tc.raw)); err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %s", tc.raw, err, tc.err)
		}
	}
}

// TestLedgerBase: a process's budgets count what it started from; what it
// reports is its own only; a base of another month is ignored.
func TestLedgerBase(t *testing.T) {
	now := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	l, err := spend.NewLedger(spend.Config{Company: "acme", Agents: map[string]int64{"coder": 5}}, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	l.SetBase("2026-10", spend.Counts{Company: spend.FromCents(100), Agents: mc{"coder": spend.FromCents(100)}})
	if ref := l.Check("r2", "coder"); ref != nil {
		t.Fatalf("refused on last month's base: %+v", ref)
	}
	l.SetBase("2026-11", spend.Counts{Company: spend.FromCents(4), Agents: mc{"coder": spend.FromCents(4)}, Runs: mc{"r1": spend.FromCents(4)}})
	if ref := l.Check("r2", "coder"); ref != nil {
		t.Fatalf("refused under budget: %+v", ref)
	}
	l.Add("r2", "coder", spend.FromCents(1))
	ref := l.Check("r2", "coder")
	if ref == nil || ref.Budget != spend.BudgetAgent ||
		ref.Message[:len("pcsync: budget spent: agent acme/coder has spent $0.05 of its monthly budget of $0.05")] !=
			"pcsync: budget spent: agent acme/coder has spent $0.05 of its monthly budget of $0.05" {
		t.Fatalf("refusal %+v", ref)
	}
	wantOwn := spend.Totals{Month: "2026-11", Counts: spend.Counts{Company: spend.FromCents(1),
		Agents: mc{"coder": spend.FromCents(1)}, Runs: mc{"r2": spend.FromCents(1)}}}
	if d := cmp.Diff(wantOwn, l.Own()); d != "" {
		t.Errorf("own (-want +got):\n%s", d)
	}
	if got := l.Totals().Runs; got["r1"] != spend.FromCents(4) || got["r2"] != spend.FromCents(1) {
		t.Errorf("totals' runs %v", got)
	}
}

// TestGateStartsFromBase: a proxy process starts from the base the daemon
// gives it in the pod's annotations (what the month's earlier processes
// counted): an agent budgeted at 5 answers, 4 of them counted by an
// earlier process, has its 2nd request refused here, as the 6th of the
// month; /spend reports this process's own answer only.
func TestGateStartsFromBase(t *testing.T) {
	month := time.Now().UTC().Format("2006-01")
	base := fmt.Sprintf(`{"month":%q,"company":%d,"agents":{"coder":%d}}`, month, 4*2_171_100, 4*2_171_100)
	up := newProvider(t, spend.AnthropicStream, "")
	srv, g := route(t, adapters.ProviderAnthropic, up, spend.Config{Agents: map[string]int64{"coder": 10},
		AnnotationsFile: annotations(t, spend.AnnotationBase+"="+strconv.Quote(base)+"\n")})
	if code, _ := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusOK {
		t.Fatalf("5th answer of the month: %d", code)
	}
	code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream")
	if code != http.StatusForbidden || !strings.Contains(body, "agent acme/coder has spent $0.11 of its monthly budget of $0.10") {
		t.Fatalf("6th request of the month: %d %s", code, body)
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/spend", nil))
	var got spend.Report
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("/spend: %d %s (%v)", rec.Code, rec.Body, err)
	}
	if len(got.Process) != 12 {
		t.Errorf("process id %q, want 12 hex digits", got.Process)
	}
	want := spend.Report{Process: got.Process, Totals: spend.Totals{Month: month, Counts: spend.Counts{Company: 2_171_100,
		Agents: mc{"coder": 2_171_100}, Runs: mc{spend.RunOf(hash): 2_171_100}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("/spend (-want +got):\n%s", d)
	}
	if got := g.Ledger().Company(); got != 5*2_171_100 {
		t.Errorf("the month's spend %d, want the base's and this process's, %d", got, 5*2_171_100)
	}
}

// TestGateWaitsForBase: with waitBase, a request waits until the daemon
// has given the process its base, and is answered 503 (which the CLIs
// retry) when none comes in time.
func TestGateWaitsForBase(t *testing.T) {
	up := newProvider(t, spend.AnthropicStream, "")
	file := annotations(t, "")
	srv, _ := route(t, adapters.ProviderAnthropic, up, spend.Config{WaitBase: true, AnnotationsFile: file},
		spend.GateOptions{BaseWait: 300 * time.Millisecond})
	code, body := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "has not received its month's spend") {
		t.Fatalf("without a base: %d %s", code, body)
	}
	if n := len(up.encoding); n != 0 {
		t.Errorf("the provider got %d requests; want none", n)
	}
	base := fmt.Sprintf(`{"month":%q,"company":0}`, time.Now().UTC().Format("2006-01"))
	time.AfterFunc(100*time.Millisecond, func() {
		line := spend.AnnotationAgentPrefix + hash + `="coder"` + "\n" + spend.AnnotationBase + "=" + strconv.Quote(base) + "\n"
		_ = os.WriteFile(file+".new", []byte(line), 0o600)
		_ = os.Rename(file+".new", file)
	})
	if code, _ := call(t, adapters.ProviderAnthropic, srv, "/v1/messages/stream"); code != http.StatusOK {
		t.Fatalf("once the base came: %d", code)
	}
}
