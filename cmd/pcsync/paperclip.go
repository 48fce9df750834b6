package main

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/pcsync/pcsync/pkg/paperclip"
)

// sideFlags choose the sides apply, diff and daemon act on: the Kubernetes
// tenants and the Paperclip agents of the companies that opt in.
type sideFlags struct {
	kubernetes, paperclip bool
}

func (f *sideFlags) add(fs *pflag.FlagSet) {
	fs.BoolVar(&f.kubernetes, "kubernetes", true, "act on the Kubernetes side (tenant manifests); false needs no cluster")
	fs.BoolVar(&f.paperclip, "paperclip", true,
		"act on the Paperclip side: the agents of companies with spec.paperclip.manage (see docs/paperclip.md)")
}

func (f *sideFlags) validate() error {
	if !f.kubernetes && !f.paperclip {
		return usageErrorf("--kubernetes=false and --paperclip=false leave nothing to do")
	}
	return nil
}

// paperclipReconciler builds the reconciler of the Paperclip side.
func paperclipReconciler(g *globalOptions) *paperclip.Reconciler {
	o := paperclip.DefaultOptions()
	o.UserAgent = "pcsync/" + toolVersion()
	o.Logger = g.Logger
	return paperclip.New(o)
}

// paperclipOptions are the Paperclip side's reconcile options for apply
// (dryRun false) and diff (true): the pause guard takes the prune guard's
// flags, so one rule holds for both sides.
func paperclipOptions(dryRun bool, pruneMax intstr.IntOrString, pruneFloor int, allowMassPrune bool) paperclip.ReconcileOptions {
	ro := paperclip.DefaultReconcileOptions()
	ro.DryRun, ro.PauseMax, ro.PauseFloor, ro.AllowMassPause = dryRun, pruneMax, pruneFloor, allowMassPrune
	return ro
}

// writeJSONWithPaperclip writes the Kubernetes side's JSON document (kube,
// nil when that side was left out) with the Paperclip report added under
// "paperclip".
func writeJSONWithPaperclip(w io.Writer, kube []byte, rep *paperclip.Report) error {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(kube)) > 0 {
		if err := json.Unmarshal(kube, &doc); err != nil {
			return err
		}
	}
	if rep != nil {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		doc["paperclip"] = b
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
