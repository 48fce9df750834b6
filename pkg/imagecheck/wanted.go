package imagecheck

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/images"
)

// Want is an image that pods of the config would run, and who needs it.
type Want struct {
	// Image is the reference.
	Image string
	// Users name what needs it: "acme/coder" (company/agent),
	// "acme environment sandbox", "sandbox helper container".
	Users []string
	// Builtin is set for pcsync's own images (Model.ImageHasServer).
	Builtin bool
}

// Wanted lists the images the config's pods would run, sorted: every
// agent's, every sandbox environment's (its own image, else that of each
// agent that runs in it), and pcsync's own image, which is the sandbox's
// helper container for an image that does not hold pcsync.
func Wanted(m *config.Model) []Want {
	byImage := map[string]*Want{}
	add := func(image, user string) {
		if image == "" {
			return
		}
		w, ok := byImage[image]
		if !ok {
			w = &Want{Image: image, Builtin: m.ImageHasServer(image)}
			byImage[image] = w
		}
		if !slices.Contains(w.Users, user) {
			w.Users = append(w.Users, user)
		}
	}
	helper := false
	for i := range m.Companies {
		c := &m.Companies[i]
		for j := range c.Spec.Agents {
			a := &c.Spec.Agents[j]
			add(m.AgentImage(a), c.Slug()+"/"+a.Name)
		}
		for _, e := range c.Spec.Paperclip.Environments {
			if e.Image != "" {
				add(e.Image, c.Slug()+" environment "+e.Name)
				helper = helper || !m.ImageHasServer(e.Image)
			}
		}
	}
	if helper {
		add(m.BuiltinImage(images.Pcsync), "sandbox helper container")
	}
	out := make([]Want, 0, len(byImage))
	for _, w := range byImage {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b Want) int { return strings.Compare(a.Image, b.Image) })
	return out
}

// Advice is what fixes an image the registry did not give: one sentence
// for the operator, naming the command or the field to change.
func Advice(m *config.Model, w Want, r Result) string {
	registry, _, _ := images.Split(w.Image)
	switch {
	case r.OK():
		return ""
	case w.Builtin && m.ImageRegistry() == "":
		return "pcsync's images have no registry: push them with `make images REGISTRY=<registry> PUSH=1` and set Settings spec.images.registry to that registry (docs/images.md)"
	case r.Status == StatusMissing && w.Builtin:
		return fmt.Sprintf("build and push pcsync's images there: `make images REGISTRY=%s PUSH=1 TAG=%s` (docs/images.md)", registry, tagOf(w.Image))
	case r.Status == StatusMissing:
		return "push the image, or correct the reference (the agent's image, Settings spec.adapters or the environment's image)"
	case r.Status == StatusDenied:
		return fmt.Sprintf("give the tenants an image pull secret for %s: Settings spec.images.pullSecrets or Company spec.imagePullSecrets", registry)
	case r.Status == StatusUnreachable:
		return fmt.Sprintf("check the registry's address %q and that this machine reaches it", registry)
	}
	return "correct the reference"
}

func tagOf(image string) string {
	_, _, tag := images.Split(image)
	return tag
}

// Finding is one wanted image with the registry's answer and, when it is
// not there, what fixes it.
type Finding struct {
	Want
	Result Result
	// Advice is empty when the image was found.
	Advice string
}

// String is one line for a log or a report.
func (f Finding) String() string {
	if f.Result.OK() {
		return f.Result.String()
	}
	return fmt.Sprintf("%s (for %s): %s", f.Result, strings.Join(f.Users, ", "), f.Advice)
}

// Preflight checks every image the config would run (Wanted).
func Preflight(ctx context.Context, m *config.Model, opts Options) []Finding {
	return Resolve(ctx, m, Wanted(m), opts)
}

// Resolve checks the wanted images in their registries, in the order
// given. pcsync's own images with no registry known are reported without
// asking anyone.
func Resolve(ctx context.Context, m *config.Model, wants []Want, opts Options) []Finding {
	var ask []string
	for _, w := range wants {
		if !(w.Builtin && m.ImageRegistry() == "") {
			ask = append(ask, w.Image)
		}
	}
	answers := map[string]Result{}
	for _, r := range Check(ctx, ask, opts) {
		answers[r.Image] = r
	}
	out := make([]Finding, 0, len(wants))
	for _, w := range wants {
		r, ok := answers[w.Image]
		if !ok {
			r = Result{Image: w.Image, Status: StatusInvalid, Detail: "no registry: neither Settings spec.images.registry nor the image pcsync runs from names one"}
		}
		out = append(out, Finding{Want: w, Result: r, Advice: Advice(m, w, r)})
	}
	return out
}
