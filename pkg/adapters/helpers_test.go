package adapters

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/pcsync/pcsync/pkg/result"
)

// want is the comparable part of an Outcome: exact fields plus fragments
// that the summary and error message must contain.
type want struct {
	SessionID    string
	Model        string
	Usage        *result.Usage
	Basis        result.UsageBasis
	Cost         *float64
	NumTurns     *int
	Code         result.ErrorCode
	Failed       bool
	Summary      string // fragment; "" means the summary must be nil
	ErrorMessage string // fragment; "" means there is no error message
	Cumulative   *result.Usage
}

func usage(in, cached, created, out int64) *result.Usage {
	return &result.Usage{InputTokens: in, CachedInputTokens: cached, CacheCreationInputTokens: created, OutputTokens: out}
}

func exit(c int) ProcessOutcome { return ProcessOutcome{ExitCode: &c} }

func exitErr(c int, stderr string) ProcessOutcome {
	return ProcessOutcome{ExitCode: &c, Stderr: stderr}
}

// parseFile feeds a file to a new parser of type t and finishes it.
func parseFile(t *testing.T, typ Type, path string, opts ParserOptions, proc ProcessOutcome) Outcome {
	t.Helper()
	a, err := Get(typ)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := a.NewParser(opts)
	if err := FeedLines(p, f); err != nil {
		t.Fatal(err)
	}
	return p.Finish(proc)
}

func val[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// checkOutcome compares got with w and reports differences as -want +got.
func checkOutcome(t *testing.T, name string, w want, got Outcome) {
	t.Helper()
	type exact struct {
		SessionID, Model string
		Usage            *result.Usage
		Basis            result.UsageBasis
		Cost             *float64
		NumTurns         *int
		Code             result.ErrorCode
		Failed           bool
		HasSummary       bool
		HasError         bool
		Cumulative       *result.Usage
	}
	wantE := exact{w.SessionID, w.Model, w.Usage, w.Basis, w.Cost, w.NumTurns, w.Code, w.Failed,
		w.Summary != "", w.ErrorMessage != "", w.Cumulative}
	gotE := exact{val(got.SessionID), val(got.Model), got.Usage, val(got.UsageBasis), got.CostUSD, got.NumTurns,
		val(got.ErrorCode), got.Failed, got.Summary != nil, got.ErrorMessage != nil, got.SessionCumulativeUsage}
	if diff := cmp.Diff(wantE, gotE, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("%s: outcome (-want +got):\n%s", name, diff)
	}
	if w.Summary != "" && !strings.Contains(val(got.Summary), w.Summary) {
		t.Errorf("%s: summary %q does not contain %q", name, val(got.Summary), w.Summary)
	}
	if w.ErrorMessage != "" && !strings.Contains(val(got.ErrorMessage), w.ErrorMessage) {
		t.Errorf("%s: error message %q does not contain %q", name, val(got.ErrorMessage), w.ErrorMessage)
	}
	checkInvariants(t, name, got)
}

// checkInvariants holds for every outcome, whatever the input.
func checkInvariants(t *testing.T, name string, o Outcome) {
	t.Helper()
	for _, u := range []*result.Usage{o.Usage, o.SessionCumulativeUsage} {
		if u != nil && (u.InputTokens < 0 || u.CachedInputTokens < 0 || u.CacheCreationInputTokens < 0 || u.OutputTokens < 0) {
			t.Errorf("%s: negative usage %+v", name, *u)
		}
	}
	if (o.Usage == nil) != (o.UsageBasis == nil) {
		t.Errorf("%s: usage %v with basis %v: both or neither", name, o.Usage, o.UsageBasis)
	}
	if o.CostUSD != nil && !(*o.CostUSD >= 0) {
		t.Errorf("%s: cost %v is not a non-negative number", name, *o.CostUSD)
	}
	if o.NumTurns != nil && *o.NumTurns < 0 {
		t.Errorf("%s: negative numTurns %d", name, *o.NumTurns)
	}
	if o.Failed != (o.ErrorCode != nil) || o.Failed != (o.ErrorMessage != nil) {
		t.Errorf("%s: failed=%v but errorCode=%v errorMessage=%v", name, o.Failed, o.ErrorCode, o.ErrorMessage)
	}
	if o.ErrorCode != nil && !o.ErrorCode.Valid() {
		t.Errorf("%s: error code %q is not one of docs/design.md's", name, *o.ErrorCode)
	}
	if o.Failed && o.Summary != nil {
		t.Errorf("%s: a failed run has summary %q", name, *o.Summary)
	}
	if o.ErrorMessage != nil && (strings.TrimSpace(*o.ErrorMessage) == "" || len(*o.ErrorMessage) > maxMessageLen) {
		t.Errorf("%s: error message %q is empty or too long", name, *o.ErrorMessage)
	}
}
