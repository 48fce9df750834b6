package config

import (
	"fmt"
	"maps"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/pcsync/pcsync/pkg/egressproxy/allow"
)

// checker applies the rules that the schema cannot express: the ones
// across documents, and the ones that need Kubernetes' or Go's own
// validation (label keys, CIDRs, host names, patch files).
type checker struct {
	m    *Model
	errs *Errors
	// protected are LoadOptions.ProtectedNamespaces.
	protected map[string]string
	// settingsDoc is the Settings document, nil when there is none.
	settingsDoc *document
	// unbuildable are the adapter types of whose CLI pcsync builds no
	// image (images.Unbuildable).
	unbuildable map[AdapterType]string
}

func (k *checker) settings(d *document) {
	s := &k.m.Settings.Spec
	k.metadata(d, k.m.Settings.Metadata)
	k.labels(d, keys("spec", "server", "podSelector"), s.Server.PodSelector)
	if u := s.Server.URL; u != "" {
		if why := loopbackURL(u); why != "" {
			p := keys("spec", "server", "url")
			k.errs.add(d.posIn(p, false), p.String(), "%q %s, which an agent pod cannot reach the Paperclip server at; give the URL of its Service (http://<service>.<namespace>.svc:<port>)", u, why)
		}
	}
	for i, g := range s.Images.AllowList {
		if _, err := path.Match(g, ""); err != nil {
			k.errs.add(d.posIn(keys("spec", "images", "allowList").with(index(i)), false),
				keys("spec", "images", "allowList").with(index(i)).String(), "invalid glob %q: %v", g, err)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(s.Adapters)) {
		for i, h := range s.Adapters[t].AllowFQDNs {
			k.fqdn(d, keys("spec", "adapters", string(t), "allowFqdns").with(index(i)), h)
		}
	}
	k.patches(d, keys("spec", "patches"), s.Patches)
	if pc := s.Paperclip; pc != nil && pc.TokenEnv != "" && pc.TokenFile != "" {
		p := keys("spec", "paperclip", "tokenFile")
		k.errs.add(d.posIn(p, true), p.String(), "set either tokenEnv or tokenFile, not both")
	}
}

func (k *checker) companies(docs []*loadedDoc) {
	slugs := map[string]Position{}
	ids := map[string]Position{}
	for i, ld := range docs {
		d, c := ld.doc, &k.m.Companies[i]
		namePos := d.posIn(keys("metadata", "name"), false)
		if first, dup := slugs[c.Metadata.Name]; dup {
			k.errs.add(namePos, "metadata.name", "company %q is defined twice (first at %s)", c.Metadata.Name, first)
		} else {
			slugs[c.Metadata.Name] = namePos
		}
		idPos := d.posIn(keys("spec", "id"), false)
		if first, dup := ids[c.Spec.ID]; dup {
			k.errs.add(idPos, "spec.id", "company id %q is used twice (first at %s)", c.Spec.ID, first)
		} else {
			ids[c.Spec.ID] = idPos
		}
		k.company(d, c)
	}
}

// ReservedNamespaces are the namespaces of Kubernetes itself that no
// company may render to: pcsync would label, restrict and fill them.
var ReservedNamespaces = []string{"kube-system", "kube-public", "kube-node-lease", "default"}

func (k *checker) company(d *document, c *Company) {
	k.metadata(d, c.Metadata)
	k.shard(d, c)
	k.companyNamespace(d, c)
	k.annotations(d, keys("spec", "serviceAccountAnnotations"), c.Spec.ServiceAccountAnnotations)
	k.egress(d, c)
	k.agents(d, c)
	k.environments(d, c)
	k.reportsTo(d, c)
	k.credentials(d, c)
	k.budget(d, c)
	k.warmPool(d, c)
	k.egressQuota(d, c)
	k.leaseSuspend(d, c)
	if c.Spec.Paperclip.Manage && k.m.Settings.Spec.Paperclip == nil {
		p := keys("spec", "paperclip", "manage")
		k.errs.add(d.posIn(p, false), p.String(),
			"company %q: managing its agents in Paperclip needs Settings spec.paperclip (url and spoolDir)", c.Metadata.Name)
	}
	k.patches(d, keys("spec", "patches"), c.Spec.Patches)
}

// shard checks the company's shard label: a DNS label, since it names the
// shard's Lease and ApplySet (pcsync-<shard>).
func (k *checker) shard(d *document, c *Company) {
	s, ok := c.Metadata.Labels[LabelShard]
	if !ok {
		return
	}
	if msgs := validation.IsDNS1123Label(s); len(msgs) > 0 {
		p := keys("metadata", "labels", LabelShard)
		k.errs.add(d.posIn(p, false), p.String(),
			"invalid shard %q: %s (it names the shard's Lease and ApplySet, pcsync-<shard>)", s, msgs[0])
	}
}

// companyNamespace refuses a company whose namespace is one pcsync must not
// restrict: Kubernetes', the Paperclip server's, pcsync's, or a protected one.
func (k *checker) companyNamespace(d *document, c *Company) {
	ns := k.m.Namespace(c)
	switch server := k.m.Settings.Spec.Server.Namespace; {
	case slices.Contains(ReservedNamespaces, ns):
		k.errs.add(d.posIn(keys("metadata", "name"), false), "metadata.name",
			"company %q renders to namespace %q, which Kubernetes itself uses: pcsync would put Pod Security restricted and a deny-all NetworkPolicy on it; rename the company or change Settings spec.namespacePrefix",
			c.Metadata.Name, ns)
	case ns == server:
		k.errs.add(d.posIn(keys("metadata", "name"), false), "metadata.name",
			"company %q renders to namespace %q, where the Paperclip server runs (Settings spec.server.namespace): its deny-all NetworkPolicy would cut the server off; rename the company or change Settings spec.namespacePrefix",
			c.Metadata.Name, ns)
	case ns == k.m.Settings.Spec.Pcsync.ServiceAccount.Namespace:
		k.errs.add(d.posIn(keys("metadata", "name"), false), "metadata.name",
			"company %q renders to namespace %q, where pcsync itself runs (Settings spec.pcsync.serviceAccount.namespace): pcsync would restrict it and, on prune, delete it; rename the company or change Settings spec.namespacePrefix",
			c.Metadata.Name, ns)
	case k.protected[ns] != "":
		k.errs.add(d.posIn(keys("metadata", "name"), false), "metadata.name",
			"company %q renders to namespace %q, which is %s: pcsync would restrict it and, on prune, delete it; rename the company or change Settings spec.namespacePrefix",
			c.Metadata.Name, ns, k.protected[ns])
	}
}

// agents checks the company's agents: unique names, allowed images, labels,
// Paperclip metadata and environment.
func (k *checker) agents(d *document, c *Company) {
	names := map[string]Position{}
	for i, a := range c.Spec.Agents {
		ap := keys("spec", "agents").with(index(i))
		if first, dup := names[a.Name]; dup {
			k.errs.add(d.posIn(ap.with(key("name")), false), ap.with(key("name")).String(),
				"agent %q is defined twice in company %q (first at %s)", a.Name, c.Metadata.Name, first)
		} else {
			names[a.Name] = d.posIn(ap.with(key("name")), false)
		}
		k.adapterImage(d, ap.with(key("adapter")), a.Adapter, a.Image, "this agent's")
		if a.Image != "" && !imageAllowed(a.Image, k.m.Settings.Spec.Images.AllowList) {
			msg := "image %q is not allowed: it matches no glob of Settings spec.images.allowList"
			if len(k.m.Settings.Spec.Images.AllowList) == 0 {
				msg = "image %q is not allowed: Settings spec.images.allowList is empty, so no agent may choose its image"
			}
			k.errs.add(d.posIn(ap.with(key("image")), false), ap.with(key("image")).String(), msg, a.Image)
		}
		k.labels(d, ap.with(key("labels")), a.Labels)
		k.labels(d, ap.with(key("nodeSelector")), a.NodeSelector)
		if _, ok := a.Paperclip.Metadata[PaperclipMarkerKey]; ok {
			p := ap.with(key("paperclip"), key("metadata"), key(PaperclipMarkerKey))
			k.errs.add(d.posIn(p, true), p.String(), "the metadata key %q is pcsync's own marker of the agents it manages", PaperclipMarkerKey)
		}
		if env := a.Paperclip.Environment; env != "" && !slices.ContainsFunc(c.Spec.Paperclip.Environments,
			func(e PaperclipEnvironment) bool { return e.Name == env }) {
			p := ap.with(key("paperclip"), key("environment"))
			k.errs.add(d.posIn(p, false), p.String(), "environment %q: company %q declares no such spec.paperclip.environments entry", env, c.Metadata.Name)
		}
	}
}

// adapterImage refuses an agent or a warm pool (whose, in the message) of an
// adapter type of whose CLI pcsync builds no image, when it names no image
// and Settings spec.adapters gives that type none.
func (k *checker) adapterImage(d *document, at fieldPath, t AdapterType, image, whose string) {
	if _, none := k.unbuildable[t]; !none || image != "" {
		return
	}
	if o, ok := k.m.Settings.Spec.Adapters[t]; ok && o.Image != nil {
		return
	}
	k.errs.add(d.posIn(at, false), at.String(), "adapter %s: pcsync builds no image of its CLI (docs/images.md): set %s image "+
		"(allowed by Settings spec.images.allowList), or Settings spec.adapters.%s.image", t, whose, t)
}

// environments checks the company's Paperclip environments: unique names,
// allowed images.
func (k *checker) environments(d *document, c *Company) {
	envNames := map[string]bool{}
	for i, e := range c.Spec.Paperclip.Environments {
		ep := keys("spec", "paperclip", "environments").with(index(i))
		if envNames[e.Name] {
			k.errs.add(d.posIn(ep.with(key("name")), false), ep.with(key("name")).String(), "environment %q is declared twice in company %q", e.Name, c.Metadata.Name)
		}
		envNames[e.Name] = true
		if e.Image != "" && !k.m.ImageAllowed(e.Image) {
			k.errs.add(d.posIn(ep.with(key("image")), false), ep.with(key("image")).String(),
				"image %q is not allowed: it is no adapter's image and matches no glob of Settings spec.images.allowList", e.Image)
		}
	}
}

// PaperclipMarkerKey is the key of an agent's Paperclip metadata that
// marks it as managed by pcsync; configs may not declare it.
const PaperclipMarkerKey = "pcsync"

// reportsTo checks that every paperclip.reportsTo names another agent of
// the company and that no chain of them is a cycle; a cycle is reported
// once, at the reportsTo of its first agent in the file.
func (k *checker) reportsTo(d *document, c *Company) {
	byName := make(map[string]int, len(c.Spec.Agents))
	for i, a := range c.Spec.Agents {
		if _, dup := byName[a.Name]; !dup {
			byName[a.Name] = i
		}
	}
	at := func(i int) fieldPath {
		return keys("spec", "agents").with(index(i), key("paperclip"), key("reportsTo"))
	}
	for i, a := range c.Spec.Agents {
		to := a.Paperclip.ReportsTo
		if to == "" {
			continue
		}
		if _, ok := byName[to]; !ok {
			k.errs.add(d.posIn(at(i), false), at(i).String(), "reportsTo %q: company %q has no agent of that name", to, c.Metadata.Name)
		}
	}
	// Each agent has at most one manager, so the chains are paths in a
	// functional graph: follow each one, marking the agents of the current
	// walk, until it ends or meets an agent seen before.
	const (
		unseen = iota
		walking
		done
	)
	state := make([]int, len(c.Spec.Agents))
	for start := range c.Spec.Agents {
		var path []int
		i := start
		for i >= 0 && state[i] == unseen {
			state[i] = walking
			path = append(path, i)
			next, ok := byName[c.Spec.Agents[i].Paperclip.ReportsTo]
			if !ok || c.Spec.Agents[i].Paperclip.ReportsTo == "" {
				next = -1
			}
			i = next
		}
		if i >= 0 && state[i] == walking {
			// A new cycle, from i to the end of path.
			first := slices.Index(path, i)
			cycle := path[first:]
			head := slices.Min(cycle)
			h := slices.Index(cycle, head)
			cycle = append(slices.Clone(cycle[h:]), cycle[:h]...)
			names := make([]string, 0, len(cycle)+1)
			for _, j := range cycle {
				names = append(names, c.Spec.Agents[j].Name)
			}
			names = append(names, c.Spec.Agents[head].Name)
			k.errs.add(d.posIn(at(head), false), at(head).String(), "reportsTo cycle in company %q: %s",
				c.Metadata.Name, strings.Join(names, " → "))
		}
		for _, j := range path {
			state[j] = done
		}
	}
}

// imageAllowed reports whether image matches a glob of the allow list; '*'
// and '?' never match '/' (path.Match). An empty list allows nothing.
func imageAllowed(image string, allow []string) bool {
	for _, g := range allow {
		if ok, err := path.Match(g, image); err == nil && ok {
			return true
		}
	}
	return false
}

func (k *checker) metadata(d *document, md Metadata) {
	k.labels(d, keys("metadata", "labels"), md.Labels)
	k.annotations(d, keys("metadata", "annotations"), md.Annotations)
}

// labels checks label keys and values the way the API server does.
func (k *checker) labels(d *document, at fieldPath, m map[string]string) {
	for _, name := range sortedKeys(m) {
		p := at.with(key(name))
		if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
			k.errs.add(d.posIn(p, true), p.String(), "invalid label key %q: %s", name, msgs[0])
		}
		if msgs := validation.IsValidLabelValue(m[name]); len(msgs) > 0 {
			k.errs.add(d.posIn(p, false), p.String(), "invalid label value %q: %s", m[name], msgs[0])
		}
	}
}

// annotations checks annotation keys and their total size the way the API
// server does.
func (k *checker) annotations(d *document, at fieldPath, m map[string]string) {
	total := 0
	for _, name := range sortedKeys(m) {
		p := at.with(key(name))
		if msgs := validation.IsQualifiedName(strings.ToLower(name)); len(msgs) > 0 {
			k.errs.add(d.posIn(p, true), p.String(), "invalid annotation key %q: %s", name, msgs[0])
		}
		total += len(name) + len(m[name])
	}
	if total > totalAnnotationSizeLimit {
		k.errs.add(d.posIn(at, true), at.String(), "annotations are %d bytes, more than the limit of %d", total, totalAnnotationSizeLimit)
	}
}

// fqdn checks a host name that egress is allowed to.
func (k *checker) fqdn(d *document, p fieldPath, h string) {
	if _, err := netip.ParseAddr(h); err == nil {
		k.errs.add(d.posIn(p, false), p.String(), "%q is an IP address, not a host name: allow it with allowCidrs", h)
		return
	}
	if allow.IsPattern(h) {
		if err := allow.CheckPattern(h); err != nil {
			k.errs.add(d.posIn(p, false), p.String(), "%s", err)
		}
		return
	}
	if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
		k.errs.add(d.posIn(p, false), p.String(), "invalid host name %q: %s", h, msgs[0])
	}
}

// patches checks each patch entry and loads the files named by path,
// relative to the file that declares them and inside the config directory.
func (k *checker) patches(d *document, at fieldPath, ps []Patch) {
	for i := range ps {
		p := &ps[i]
		pp := at.with(index(i))
		p.Source = d.posIn(pp, true)
		switch {
		case p.Patch != "" && p.Path != "":
			k.errs.add(d.posIn(pp, true), pp.String(), "set either patch or path, not both")
			continue
		case p.Patch == "" && p.Path == "":
			k.errs.add(d.posIn(pp, true), pp.String(), "a patch needs patch (inline) or path (a file)")
			continue
		case p.Path == "":
			continue
		}
		fp := pp.with(key("path"))
		if filepath.IsAbs(p.Path) {
			k.errs.add(d.posIn(fp, false), fp.String(), "patch path %q must be relative to the file that names it", p.Path)
			continue
		}
		file := filepath.Join(filepath.Dir(d.file), filepath.FromSlash(p.Path))
		if !inside(k.m.Dir, file) {
			k.errs.add(d.posIn(fp, false), fp.String(), "patch file %q is outside the config directory", p.Path)
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			msg := fmt.Sprintf("patch file %s: %v", file, err)
			if os.IsNotExist(err) {
				msg = fmt.Sprintf("patch file %s does not exist", file)
			}
			k.errs.add(d.posIn(fp, false), fp.String(), "%s", msg)
			continue
		}
		if len(strings.TrimSpace(string(b))) == 0 {
			k.errs.add(d.posIn(fp, false), fp.String(), "patch file %s is empty", file)
			continue
		}
		p.Patch, p.Path = string(b), file
	}
}

// inside reports whether file lies inside dir, comparing both from the
// working directory when one is absolute and the other not (a file given
// by an absolute path to LoadFiles).
func inside(dir, file string) bool {
	if filepath.IsAbs(dir) != filepath.IsAbs(file) {
		var errDir, errFile error
		dir, errDir = filepath.Abs(dir)
		file, errFile = filepath.Abs(file)
		if errDir != nil || errFile != nil {
			return false
		}
	}
	rel, err := filepath.Rel(dir, file)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// warnings are findings that do not make the config invalid.
// settings is the Settings document (nil when there is none), docs the
// Company documents by slug.
func warnings(m *Model, settings *document, docs map[string]*document) []Warning {
	var out []Warning
	if u := m.Settings.Spec.AllowUnsafePatches; len(u) > 0 {
		pos := m.Settings.Source
		if settings != nil {
			pos = settings.posIn(keys("spec", "allowUnsafePatches"), true)
		}
		out = append(out, Warning{Pos: pos, Field: "spec.allowUnsafePatches", Message: fmt.Sprintf(
			"patches may weaken %s in every tenant: pcsync does not refuse them", unsafeList(u))})
	}
	for i := range m.Companies {
		c := &m.Companies[i]
		if len(c.Spec.AllowUnsafePatches) == 0 {
			continue
		}
		pos := c.Source
		if d := docs[c.Metadata.Name]; d != nil {
			pos = d.posIn(keys("spec", "allowUnsafePatches"), true)
		}
		out = append(out, Warning{Pos: pos, Field: "spec.allowUnsafePatches", Message: fmt.Sprintf(
			"company %q: patches may weaken %s of this tenant: pcsync does not refuse them", c.Metadata.Name, unsafeList(c.Spec.AllowUnsafePatches))})
	}
	out = append(out, privateCIDRWarnings(m, docs)...)
	for i := range m.Companies {
		c := &m.Companies[i]
		if m.EgressMode(c) != EgressStandard || !m.WantsFQDNs(c) {
			continue
		}
		pos, field := c.Source, ""
		if d := docs[c.Metadata.Name]; d != nil {
			field = "spec.egress"
			if l := locate(d.expr, keys("spec", "egress")); !l.found {
				field = "metadata.name"
			}
			pos = d.posIn(keys(strings.Split(field, ".")...), field == "spec.egress")
		}
		out = append(out, Warning{Pos: pos, Field: field, Message: fmt.Sprintf(
			"company %q: egress mode standard cannot enforce host names (FQDNs); its agents may reach every public IPv4 address on TCP 443. Egress mode proxy (the default) or cilium allows only the named hosts", c.Metadata.Name)})
	}
	return out
}

// unsafeList names hardenings for a warning: "podSecurity, rbac".
func unsafeList(us []UnsafePatch) string {
	s := make([]string, len(us))
	for i, u := range us {
		s[i] = string(u)
	}
	return strings.Join(s, ", ")
}

// totalAnnotationSizeLimit is the API server's limit on the summed size of
// an object's annotation keys and values.
const totalAnnotationSizeLimit = 256 << 10

// loopbackURL says why a URL names this host (localhost, a loopback or
// unspecified address), or "" when it does not.
func loopbackURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	h := strings.ToLower(u.Hostname())
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "names localhost"
	}
	if a, err := netip.ParseAddr(h); err == nil {
		switch {
		case a.IsLoopback():
			return "is a loopback address"
		case a.IsUnspecified():
			return "is the unspecified address"
		}
	}
	return ""
}
