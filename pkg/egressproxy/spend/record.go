package spend

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"time"
)

// Counts are spend in micro-cents: the company's, and each agent's and
// run's.
type Counts struct {
	Company MicroCents            `json:"company"`
	Agents  map[string]MicroCents `json:"agents,omitempty"`
	Runs    map[string]MicroCents `json:"runs,omitempty"`
}

// add returns c plus o, in new maps.
func (c Counts) add(o Counts) Counts {
	return c.combine(o, func(a, b MicroCents) MicroCents { return a + b })
}

// max returns c with each figure raised to o's where o's is the larger,
// in new maps: what one process reported, which only grows, from two
// reports in either order.
func (c Counts) max(o Counts) Counts {
	return c.combine(o, func(a, b MicroCents) MicroCents { return max(a, b) })
}

// combine returns c's and o's figures combined by f, key by key, in new
// maps.
func (c Counts) combine(o Counts, f func(a, b MicroCents) MicroCents) Counts {
	return Counts{Company: f(c.Company, o.Company), Agents: combineMaps(c.Agents, o.Agents, f), Runs: combineMaps(c.Runs, o.Runs, f)}
}

func combineMaps(m, o map[string]MicroCents, f func(a, b MicroCents) MicroCents) map[string]MicroCents {
	if len(m) == 0 && len(o) == 0 {
		return nil
	}
	out := make(map[string]MicroCents, len(m)+len(o))
	maps.Copy(out, m)
	for k, v := range o {
		out[k] = f(out[k], v)
	}
	return out
}

// RecordVersion is the version of the Record's encoding.
const RecordVersion = 1

// Record is a company's spend in a month, kept outside the proxy so that
// it outlives the proxy's processes: Closed is what processes no longer
// running counted, Live what each running one (by the id it drew at
// start) reported it counted since it started. The month's spend is
// their sum; a process starts from the sum of the others' (Base) and adds
// its own. Kept per process, not as one figure, so that neither what two
// overlapping processes count (a rollout) nor what a new one counts
// before it has read its base is lost or counted twice.
type Record struct {
	Version int               `json:"v"`
	Month   string            `json:"month"`
	Closed  Counts            `json:"closed"`
	Live    map[string]Counts `json:"live,omitempty"`
}

// Observe takes a process's report of what it counted in month. A report
// of a month before the record's is dropped (that month is over); one of
// a later month starts the record again. Reports of one process are
// merged figure by figure, keeping the larger: a process's counts only
// grow within a month, so an older report read late changes nothing.
func (r *Record) Observe(month, process string, c Counts) {
	switch {
	case month < r.Month:
		return
	case month > r.Month:
		*r = Record{Version: RecordVersion, Month: month}
	}
	if r.Live == nil {
		r.Live = map[string]Counts{}
	}
	r.Live[process] = r.Live[process].max(c)
}

// Close folds a process that no longer runs into Closed.
func (r *Record) Close(process string) {
	if c, ok := r.Live[process]; ok {
		r.Closed = r.Closed.add(c)
		delete(r.Live, process)
	}
}

// Base is what the month's processes but except counted: where except
// starts from ("" for the month's whole spend).
func (r *Record) Base(except string) Counts {
	b := r.Closed.add(Counts{})
	for p, c := range r.Live {
		if p != except {
			b = b.add(c)
		}
	}
	return b
}

// DropRuns forgets the runs that ended (live false), in Closed and in
// Live: a run's figure is needed only for the cap per run, and the record
// must stay small (an annotation).
func (r *Record) DropRuns(live func(run string) bool) {
	drop := func(m map[string]MicroCents) {
		maps.DeleteFunc(m, func(run string, _ MicroCents) bool { return !live(run) })
	}
	drop(r.Closed.Runs)
	for _, c := range r.Live {
		drop(c.Runs)
	}
}

// Encode is r's JSON.
func (r *Record) Encode() []byte {
	r.Version = RecordVersion
	b, err := json.Marshal(r)
	if err != nil {
		// Strings and integers only: always marshals.
		panic(err)
	}
	return b
}

// DecodeRecord reads a Record, refusing an unknown version or field, a
// malformed month and a negative figure.
func DecodeRecord(raw []byte) (Record, error) {
	var r Record
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return Record{}, fmt.Errorf("spend record: %w", err)
	}
	if r.Version != RecordVersion {
		return Record{}, fmt.Errorf("spend record: version %d, want %d", r.Version, RecordVersion)
	}
	if _, err := time.Parse("2006-01", r.Month); err != nil {
		return Record{}, fmt.Errorf("spend record: month %q: want YYYY-MM", r.Month)
	}
	if err := r.Closed.check("closed"); err != nil {
		return Record{}, err
	}
	for p, c := range r.Live {
		if err := c.check("live." + p); err != nil {
			return Record{}, err
		}
	}
	return r, nil
}

// check refuses a negative figure, naming it.
func (c Counts) check(field string) error {
	if c.Company < 0 {
		return fmt.Errorf("spend record: %s.company: negative (%d)", field, c.Company)
	}
	for kind, m := range map[string]map[string]MicroCents{"agents": c.Agents, "runs": c.Runs} {
		for k, v := range m {
			if v < 0 {
				return fmt.Errorf("spend record: %s.%s.%s: negative (%d)", field, kind, k, v)
			}
		}
	}
	return nil
}
