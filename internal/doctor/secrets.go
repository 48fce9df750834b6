package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/introspect"
	"github.com/pcsync/pcsync/pkg/secretcheck"
)

// secretRef is a Secret a company's config names, and what its absence
// means.
type secretRef struct {
	name string
	// found is the detail when it exists; missing the status and detail
	// when it does not.
	found, missing string
	status         Status
}

// checkSecrets checks, without reading them (secretcheck.Exists), that the
// Secrets each company names exist in its namespace: secretRefs, image pull
// secrets (configured and inherited) and the credentials' Secrets.
func (d *doctor) checkSecrets(ctx context.Context, inherited introspect.Inheritance) {
	if d.model == nil {
		return
	}
	for i := range d.model.Companies {
		c := &d.model.Companies[i]
		ns := d.model.Namespace(c)
		refs := d.secretRefs(c, inherited)
		if len(refs) == 0 {
			continue
		}
		if _, err := d.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			d.add("secrets", ns, StatusWarn, "namespace not applied yet; %d Secret(s) it names to create there once it is", len(refs))
			continue
		}
		for _, r := range refs {
			name := ns + "/" + r.name
			err := secretcheck.Exists(ctx, d.cs, ns, r.name)
			switch {
			case err == nil:
				d.add("secrets", name, StatusOK, "%s", r.found)
			case apierrors.IsNotFound(err):
				d.add("secrets", name, r.status, "%s", r.missing)
			default:
				d.add("secrets", name, StatusFail, "%v", err)
			}
		}
	}
}

// secretRefs are the Secrets company c names, in the rows' order.
func (d *doctor) secretRefs(c *config.Company, inherited introspect.Inheritance) []secretRef {
	slug := c.Slug()
	var refs []secretRef
	for _, s := range c.Spec.SecretRefs {
		r := secretRef{name: s.Name, found: "secretRef exists", status: StatusFail,
			missing: "secretRef does not exist: agent pods of " + slug + " cannot start (create it, or mark it optional)"}
		if s.Optional {
			r.status, r.missing = StatusWarn, "optional secretRef does not exist: agents of "+slug+" run without its keys"
		}
		refs = append(refs, r)
	}
	for _, s := range introspect.MergePullSecrets(d.model.ImagePullSecrets(c), inherited.ImagePullSecrets) {
		what := "imagePullSecret"
		if !slices.Contains(d.model.ImagePullSecrets(c), s) {
			what = "inherited imagePullSecret"
		}
		refs = append(refs, secretRef{name: s, found: what + " exists", status: StatusFail,
			missing: what + " does not exist: private images of " + slug + " cannot be pulled"})
	}
	for _, cr := range c.Spec.Credentials {
		refs = append(refs, credentialRef(c, d.model.Namespace(c), cr))
	}
	return refs
}

// credentialRef is the Secret of credential cr of company c, whose tenant
// namespace is ns. Its key is not checked: pcsync does not read Secrets.
func credentialRef(c *config.Company, ns string, cr config.Credential) secretRef {
	what := "Secret of credential " + c.Slug() + "/" + cr.Name
	me := secretcheck.MissingError{Company: c.Slug(), Credential: cr.Name, Namespace: ns, Secret: cr.SecretRef.Name, Key: cr.SecretRef.Key}
	return secretRef{name: cr.SecretRef.Name, status: StatusFail,
		found: fmt.Sprintf("%s exists (its key %q is not checked: pcsync does not read Secrets)", what, cr.SecretRef.Key),
		missing: fmt.Sprintf("%s does not exist: the runs and leases of %s (%s) fail before their pods start; %s",
			what, strings.Join(agentsUsing(c, cr.Provider), ", "), cr.Provider, me.Hint())}
}
