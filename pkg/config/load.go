package config

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/pcsync/pcsync/pkg/fastpath"
	"github.com/pcsync/pcsync/pkg/images"
)

// LoadOptions tune Load. The zero value is valid; DefaultLoadOptions
// spells out the defaults.
type LoadOptions struct {
	// Concurrency is how many files are parsed and validated at once.
	// 0 means GOMAXPROCS.
	Concurrency int
	// MaxFileSize is the largest config file read, in bytes; larger files
	// are an error. 0 means 8 MiB.
	MaxFileSize int64
	// MaxNodes is the most values one file may hold once YAML aliases are
	// expanded, which stops alias bombs. 0 means 1,000,000.
	MaxNodes int
	// Validator checks documents against the schema; nil means the
	// package's shared one.
	Validator *Validator
	// ProtectedNamespaces are namespaces that pcsync itself needs at run
	// time, which no company may render to: the ApplySet parent's
	// namespace, the namespace pcsync runs in. Each maps to what it is, for
	// the error ("the ApplySet parent's namespace (--applyset-namespace)").
	// The namespaces Kubernetes uses (ReservedNamespaces) and Settings
	// spec.server.namespace are always refused.
	ProtectedNamespaces map[string]string
	// Reference exports valid documents with CUE's MarshalJSON instead of
	// the exporter that stands in for it (see package fastpath).
	Reference fastpath.Reference
	// Images is where pcsync's own images are unless Settings
	// spec.images.registry says (Model.Images). An empty Tag means
	// DefaultImageTag.
	Images ImageDefaults
	// Cache, when set, keeps what parsing and validating each valid file
	// gave from one Load to the next (see LoadCache).
	Cache *LoadCache
}

// DefaultImageTag is the tag of pcsync's images when LoadOptions.Images has
// none: that of a development build.
const DefaultImageTag = "dev"

// DefaultLoadOptions returns the options Load uses for zero fields.
func DefaultLoadOptions() LoadOptions {
	return LoadOptions{MaxFileSize: 8 << 20, MaxNodes: 1_000_000}
}

func (o *LoadOptions) complete() error {
	d := DefaultLoadOptions()
	o.MaxFileSize = cmp.Or(max(o.MaxFileSize, 0), d.MaxFileSize)
	o.MaxNodes = cmp.Or(max(o.MaxNodes, 0), d.MaxNodes)
	o.Images.Tag = cmp.Or(o.Images.Tag, DefaultImageTag)
	if o.Validator == nil {
		v, err := sharedValidator()
		if err != nil {
			return err
		}
		o.Validator = v
	}
	if o.Reference {
		o.Validator = o.Validator.referencePath()
	}
	o.Concurrency = cmp.Or(max(o.Concurrency, 0), o.Validator.limit)
	return nil
}

// sharedValidator is the Validator of Load and ParseRun when none is
// given: compiled on first use, then only lent out under its own lock.
var sharedValidator = sync.OnceValues(func() (*Validator, error) { return NewValidator(0) })

// loadedDoc is a document with its kind and, when valid, its JSON and
// the JSON decoded into the model (or the decoding error).
type loadedDoc struct {
	doc  *document
	kind string
	json []byte
	// settings or company is the decoded document, by kind.
	settings  *Settings
	company   *Company
	decodeErr error
}

// decode decodes a config document's JSON into the model; it runs in the
// loading goroutines, so that assemble only puts the pieces together.
func (d *loadedDoc) decode() {
	switch d.kind {
	case "Settings":
		var s Settings
		if d.decodeErr = json.Unmarshal(d.json, &s); d.decodeErr == nil {
			d.settings = &s
		}
	case "Company":
		var c Company
		if d.decodeErr = json.Unmarshal(d.json, &c); d.decodeErr == nil {
			d.company = &c
		}
	}
}

// patches are the spec.patches of a decoded document.
func (d *loadedDoc) patches() ([]Patch, bool) {
	switch {
	case d.settings != nil:
		return d.settings.Spec.Patches, true
	case d.company != nil:
		return d.company.Spec.Patches, true
	}
	return nil, false
}

// fileResult is what parsing and validating one file gave.
type fileResult struct {
	file string
	docs []*loadedDoc
	errs []*Error
}

// Load reads every *.yaml and *.yml file under dir (recursively; hidden
// files and directories are skipped), validates each document against the
// schema and the rules across documents, and returns the model with the
// schema's defaults. Invalid config gives an *Errors holding every
// problem; other failures (an unreadable directory) give a plain error.
func Load(ctx context.Context, dir string, opts LoadOptions) (*Model, error) {
	err := opts.complete()
	if err != nil {
		return nil, err
	}
	names, err := listFiles(dir)
	if err != nil {
		return nil, err
	}
	files := make([]File, len(names))
	for i, n := range names {
		files[i] = File{Name: n}
	}
	return load(ctx, dir, files, opts)
}

// File is a config file given by itself, not found in a directory
// (pcsync validate FILE…, or - for standard input).
type File struct {
	// Name names the file in errors ("<stdin>" for standard input) and
	// is read unless Data is set.
	Name string
	// Data is the file's content; nil reads Name.
	Data []byte
}

// LoadFiles is Load of files alone, as if they were the only files of a
// config directory: the rules across documents see only their documents,
// and with no Settings among them the schema's defaults apply. Patch files
// they name must lie inside root, as inside the config directory for Load.
func LoadFiles(ctx context.Context, root string, files []File, opts LoadOptions) (*Model, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	return load(ctx, root, files, opts)
}

// load parses and validates files in parallel and assembles the model of
// the config directory dir.
func load(ctx context.Context, dir string, files []File, opts LoadOptions) (*Model, error) {
	if opts.Cache != nil {
		opts.Cache.begin()
		defer opts.Cache.end()
	}
	results := make([]fileResult, len(files))
	// An I/O error does not stop the other files (the first is returned);
	// ctx's end does.
	var g errgroup.Group
	g.SetLimit(opts.Concurrency)
	for i, file := range files {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() (err error) {
			if file.Data != nil {
				results[i] = loadData(file.Name, file.Data, opts)
				return nil
			}
			results[i], err = loadFile(file.Name, opts)
			return err
		})
	}
	ioErr := g.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	if ioErr != nil {
		return nil, ioErr
	}
	return assemble(dir, results, opts)
}

// listFiles finds the config files under dir, sorted.
func listFiles(dir string) ([]string, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("config directory %s: not a directory", dir)
	}
	// The directory may be a symbolic link (git-sync's worktree link, an
	// ArgoCD checkout): walk what it points to, but name files by the path
	// the user gave, so that errors point where the user looks.
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("config directory: %w", err)
		}
		if rel, relErr := filepath.Rel(root, p); relErr == nil && root != dir {
			p = filepath.Join(dir, rel)
		}
		name := d.Name()
		if p != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if ext := strings.ToLower(filepath.Ext(name)); ext == ".yaml" || ext == ".yml" {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(files)
	return files, nil
}

// loadFile parses a file and validates its documents.
func loadFile(name string, opts LoadOptions) (fileResult, error) {
	r := fileResult{file: name}
	f, err := os.Open(name)
	if err != nil {
		return r, fmt.Errorf("config file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, fmt.Errorf("config file: %w", err)
	}
	if st.Size() > opts.MaxFileSize {
		r.errs = append(r.errs, tooLarge(name, opts))
		return r, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return r, fmt.Errorf("config file: %w", err)
	}
	return loadData(name, data, opts), nil
}

// tooLarge is the error of a file larger than opts.MaxFileSize.
func tooLarge(name string, opts LoadOptions) *Error {
	return &Error{Pos: Position{File: name, Line: 1, Column: 1}, Message: fmt.Sprintf("file is larger than %d bytes", opts.MaxFileSize)}
}

// loadData parses the content of file name and validates its documents.
func loadData(name string, data []byte, opts LoadOptions) fileResult {
	r := fileResult{file: name}
	if int64(len(data)) > opts.MaxFileSize {
		r.errs = append(r.errs, tooLarge(name, opts))
		return r
	}
	validate := opts.Validator.validate
	var sum [sha256.Size]byte
	if opts.Cache != nil {
		sum = sha256.Sum256(data)
		if docs, ok := opts.Cache.file(name, sum, opts); ok {
			for _, d := range docs {
				d.decode()
			}
			r.docs = docs
			return r
		}
		validate = opts.Cache.validator(opts.Validator, sum)
	}
	docs, perr := parseYAML(name, data, parseLimits{maxNodes: opts.MaxNodes})
	if perr != nil {
		r.errs = append(r.errs, perr)
	}
	for _, d := range docs {
		ld, errs := checkDocumentWith(d, configKinds, validate)
		r.errs = append(r.errs, errs...)
		if ld != nil {
			ld.decode()
			r.docs = append(r.docs, ld)
		}
	}
	if opts.Cache != nil && len(r.errs) == 0 {
		opts.Cache.keepFile(name, sum, opts, r.docs)
	}
	return r
}

// configKinds are the kinds a config directory holds.
var configKinds = []string{"Settings", "Company"}

// checkDocument reads apiVersion and kind and validates the document
// against the schema of its kind.
func checkDocument(d *document, v *Validator, kinds []string) (*loadedDoc, []*Error) {
	return checkDocumentWith(d, kinds, v.validate)
}

// checkDocumentWith is checkDocument with the schema's validation given.
func checkDocumentWith(d *document, kinds []string, validate func(string, *document) ([]byte, []*Error)) (*loadedDoc, []*Error) {
	if kindOf(d.expr) != "struct" {
		return nil, []*Error{{Pos: d.start, Message: "a document must be a mapping with apiVersion, kind, metadata and spec"}}
	}
	api, hasAPI := d.stringAt(keys("apiVersion"))
	kind, hasKind := d.stringAt(keys("kind"))
	switch {
	case !hasKind:
		return nil, []*Error{{Pos: d.posIn(keys("kind"), true), Field: "kind",
			Message: "kind is required: one of " + strings.Join(kinds, ", ")}}
	case !hasAPI:
		return nil, []*Error{{Pos: d.posIn(keys("apiVersion"), true), Field: "apiVersion",
			Message: "apiVersion is required: " + APIVersion}}
	case api != APIVersion:
		return nil, []*Error{{Pos: d.posIn(keys("apiVersion"), false), Field: "apiVersion",
			Message: fmt.Sprintf("unknown apiVersion %q: pcsync reads %s", api, APIVersion)}}
	case !slices.Contains(kinds, kind):
		msg := fmt.Sprintf("unknown kind %q: must be one of %s", kind, strings.Join(kinds, ", "))
		if kind == "Run" {
			msg = "a Run request belongs in the spool directory, not in the config directory"
		}
		return nil, []*Error{{Pos: d.posIn(keys("kind"), false), Field: "kind", Message: msg}}
	}
	out, errs := validate(kind, d)
	if len(errs) > 0 {
		return nil, errs
	}
	return &loadedDoc{doc: d, kind: kind, json: out}, nil
}

// assemble decodes the valid documents into the model and checks the
// rules across documents.
func assemble(dir string, results []fileResult, opts LoadOptions) (*Model, error) {
	errs := &Errors{}
	m := &Model{Dir: dir, Builtin: opts.Validator.builtin, Settings: opts.Validator.defaultSettings, Images: opts.Images}
	var settingsDoc *loadedDoc
	var companyDocs []*loadedDoc
	patchFiles := referencedPatchFiles(results)
	for _, r := range results {
		if patchFiles[r.file] {
			// A patch file named by a patch's path is not a config document.
			continue
		}
		errs.List = append(errs.List, r.errs...)
		for _, d := range r.docs {
			switch d.kind {
			case "Settings":
				if settingsDoc != nil {
					errs.add(d.doc.posIn(keys("kind"), false), "kind",
						"a second Settings document; the first is at %s", settingsDoc.doc.start)
					continue
				}
				settingsDoc = d
				if d.decodeErr != nil {
					errs.add(d.doc.start, "", "cannot decode Settings: %v", d.decodeErr)
					continue
				}
				s := *d.settings
				s.Source = d.doc.start
				m.Settings = s
			case "Company":
				if d.decodeErr != nil {
					errs.add(d.doc.start, "", "cannot decode Company: %v", d.decodeErr)
					continue
				}
				c := *d.company
				c.Source = d.doc.start
				m.Companies = append(m.Companies, c)
				companyDocs = append(companyDocs, d)
			}
		}
	}
	chk := &checker{m: m, errs: errs, protected: opts.ProtectedNamespaces, unbuildable: images.Unbuildable()}
	if settingsDoc != nil {
		chk.settingsDoc = settingsDoc.doc
		chk.settings(settingsDoc.doc)
	}
	chk.companies(companyDocs)
	if err := errs.err(); err != nil {
		return nil, err
	}
	// Sort companies by slug, keeping their documents alongside.
	idx := make([]int, len(m.Companies))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(m.Companies[a].Metadata.Name, m.Companies[b].Metadata.Name) })
	sorted := make([]Company, len(idx))
	for i, j := range idx {
		sorted[i] = m.Companies[j]
	}
	m.Companies = sorted
	docs := map[string]*document{}
	for _, d := range companyDocs {
		if name, ok := d.doc.stringAt(keys("metadata", "name")); ok {
			docs[name] = d.doc
		}
	}
	var sd *document
	if settingsDoc != nil {
		sd = settingsDoc.doc
	}
	m.Warnings = warnings(m, sd, docs)
	return m, nil
}

// referencedPatchFiles are the files that valid documents name in a
// patch's path: they hold kustomize patches, not pcsync documents.
func referencedPatchFiles(results []fileResult) map[string]bool {
	out := map[string]bool{}
	for _, r := range results {
		for _, d := range r.docs {
			var paths []string
			if ps, ok := d.patches(); ok {
				for _, p := range ps {
					paths = append(paths, p.Path)
				}
			} else {
				// Not decoded into the model (assemble reports why): read
				// just the paths.
				var doc struct {
					Spec struct {
						Patches []struct {
							Path string `json:"path"`
						} `json:"patches"`
					} `json:"spec"`
				}
				if json.Unmarshal(d.json, &doc) != nil {
					continue
				}
				for _, p := range doc.Spec.Patches {
					paths = append(paths, p.Path)
				}
			}
			for _, path := range paths {
				if path != "" && !filepath.IsAbs(path) {
					out[filepath.Join(filepath.Dir(d.doc.file), filepath.FromSlash(path))] = true
				}
			}
		}
	}
	return out
}
