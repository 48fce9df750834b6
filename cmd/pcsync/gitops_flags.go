package main

import (
	"github.com/spf13/pflag"

	"github.com/pcsync/pcsync/pkg/apply"
)

// forceConflictsUsage is the help of --force-conflicts, word for word the same
// in apply, diff and daemon: the three agree on what the repository means.
const forceConflictsUsage = "take back fields another field manager changed (kubectl edit or patch, another controller): " +
	"the config repository owns the fields it declares; --force-conflicts=false reports such objects as conflicts instead"

// addForceConflicts adds --force-conflicts (default true) to fs.
func addForceConflicts(fs *pflag.FlagSet, p *bool) {
	fs.BoolVar(p, "force-conflicts", true, forceConflictsUsage)
}

// pruneFlags are the prune flags, with the same wording in apply, diff and
// daemon.
type pruneFlags struct {
	prune bool
	max   string
	floor int
	// allowMass is --allow-mass-prune (apply and diff only: a daemon asks
	// for approval instead).
	allowMass bool
}

// add adds --prune, --prune-max, --prune-floor and, with allowMass,
// --allow-mass-prune. pruneUsage is the command's own help of --prune.
func (p *pruneFlags) add(fs *pflag.FlagSet, pruneUsage string, allowMass bool) {
	d := apply.DefaultApplyOptions()
	fs.BoolVar(&p.prune, "prune", false, pruneUsage)
	fs.StringVar(&p.max, "prune-max", d.PruneMax.String(),
		"prune guard: most tenants (companies) one prune may remove, a count (10) or a share of the fleet (25%); "+
			"an empty render or the whole fleet is always held")
	fs.IntVar(&p.floor, "prune-floor", d.PruneFloor,
		"prune guard: removing up to this many tenants is always allowed, whatever --prune-max gives for a small fleet")
	if allowMass {
		fs.BoolVar(&p.allowMass, "allow-mass-prune", false,
			"lift the prune guard for this run (or approve one held prune: see the message that refuses it)")
	}
}

// limits checks the flags and returns --prune-max and --prune-floor.
func (p *pruneFlags) limits() (apply.ApplyOptions, error) {
	o := apply.DefaultApplyOptions()
	pm, err := apply.ParsePruneMax(p.max)
	if err != nil {
		return o, usageErrorf("--prune-max: %v", err)
	}
	if p.floor < 0 {
		return o, usageErrorf("--prune-floor %d: want 0 or more", p.floor)
	}
	o.Prune, o.PruneMax, o.PruneFloor, o.AllowMassPrune = p.prune, pm, p.floor, p.allowMass
	return o, nil
}
