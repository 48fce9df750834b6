package kubeexec

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestHandleStates: a handle's state changes only along handleTransitions,
// and of two goroutines racing from the same state (a step finding the run
// final, the executor stopping) the first one wins.
func TestHandleStates(t *testing.T) {
	type move struct{ from, next handleState }
	for _, tc := range []struct {
		name  string
		moves []move
		// want is whether each move happened, then the state at the end.
		want      []bool
		wantState handleState
	}{{
		name:      "the run finishes",
		moves:     []move{{stateFollowing, stateFinishing}, {stateFollowing, stateStopped}, {stateFinishing, stateFinished}},
		want:      []bool{true, false, true},
		wantState: stateFinished,
	}, {
		name:      "the executor stops first: no finish",
		moves:     []move{{stateFollowing, stateStopped}, {stateFollowing, stateFinishing}},
		want:      []bool{true, false},
		wantState: stateStopped,
	}, {
		name:      "the executor stops while the end of the log is read",
		moves:     []move{{stateFollowing, stateFinishing}, {stateFinishing, stateStopped}, {stateFinishing, stateFinished}},
		want:      []bool{true, true, false},
		wantState: stateStopped,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &handle{state: stateFollowing}
			var got []bool
			for _, m := range tc.moves {
				got = append(got, h.to(m.from, m.next))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("moves made (-want +got):\n%s", diff)
			}
			if h.state != tc.wantState {
				t.Errorf("state %s, want %s", h.state, tc.wantState)
			}
		})
	}
	for _, m := range []struct{ from, next handleState }{
		{stateFinished, stateFollowing}, {stateStopped, stateFinished}, {stateFollowing, stateFinished},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("to(%s, %s) did not panic", m.from, m.next)
				}
			}()
			(&handle{state: m.from}).to(m.from, m.next)
		}()
	}
}
