package config

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config/configtest"
	"github.com/pcsync/pcsync/schema"
)

// TestExportableKinds checks that the exporter walks the config kinds (the
// schema has no comprehension that reaches them) and takes left-out
// fields' values from the schema (no field refers to another).
func TestExportableKinds(t *testing.T) {
	files, err := schemaSyntax()
	if err != nil {
		t.Fatal(err)
	}
	facts := readSchema(files, schema.Kinds())
	want := map[string]bool{"Company": true, "Settings": true}
	if !reflect.DeepEqual(facts.exportable, want) {
		t.Errorf("exportable kinds = %v, want %v", facts.exportable, want)
	}
	if !facts.staticDefaults {
		t.Errorf("the schema's defaults do not count as static")
	}
}

// exportCorpus are valid documents that use every field of the config
// schema, in every form it allows.
var exportCorpus = []string{`apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata:
  name: all
  labels: {a: b}
  annotations: {x: "y z"}
spec:
  namespacePrefix: t-
  server:
    namespace: pc
    podSelector: {app: server, tier: "1"}
    port: 8080
  egress: {mode: cilium}
  images:
    registry: registry.example.com/mirror
    allowList: ["a/*", "b/?"]
    pullSecrets: [regcred]
  defaults:
    quota: {pods: 5, requestsCpu: 2.5, limitsMemory: 1Gi}
    limitRange:
      max: {cpu: 8}
      default: {memory: 1.5}
    jobs: {ttlSecondsAfterFinished: 0, retain: true}
    resources:
      requests: {cpu: 100m}
      limits: {memory: 1e3}
  adapters:
    claude_local:
      image: img:1
      envKeys: [A_B]
    codex_local:
      allowFqdns: []
      command: [codex, --x]
  patches:
    - patch: "x"
      target: {group: g, version: v, kind: k, name: n, namespace: ns, labelSelector: l, annotationSelector: a}
      options: {allowNameChange: true, allowKindChange: false}
    - path: p.yaml
`, `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata:
  name: empty
`, `apiVersion: pcsync.io/v1alpha1
kind: Settings
metadata: {name: partial}
spec:
  server: {podSelector: {tier: backend}}
  defaults:
    quota: {requestsMemory: 10, requestsCpu: 0.0000001, limitsCpu: 1e21}
    limitRange: {min: {}}
`, `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata:
  name: all
  labels: {team: a}
  annotations: {note: "hello world"}
spec:
  id: "123"
  egress:
    mode: standard
    allowFqdns: [a.example.com]
    allowPrivateCidrs: true
    allowCidrs:
      - 10.0.0.0/8
      - {cidr: 192.168.0.0/16}
      - {cidr: 172.16.0.0/12, ports: [80, 8080], protocol: UDP}
      - {cidr: 1.2.3.0/24, protocol: SCTP}
  quota: {pods: 0, requestsCpu: "1", requestsMemory: 0.5, limitsCpu: 4, limitsMemory: 8Gi}
  limitRange:
    max: {cpu: 2, memory: 4Gi}
    min: {cpu: 10m}
    default: {memory: 1Gi}
    defaultRequest: {cpu: 0.25}
  jobs: {ttlSecondsAfterFinished: 10, activeDeadlineSeconds: 20, retain: false}
  runtimeClassName: kata-fc
  serviceAccountAnnotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::1:role/x"}
  imagePullSecrets: [a, b.c]
  sessions: {size: 20Gi, storageClassName: efs}
  secretRefs:
    - name: s1
    - name: s2
      optional: false
  patches:
    - patch: |
        apiVersion: v1
        kind: ServiceAccount
        metadata: {name: x}
  agents:
    - name: a1
      adapter: claude_local
      model: m
      effort: high
      variant: v
      maxTurnsPerRun: 3
      instructionsFile: AGENTS.md
      extraArgs: ["--x", "y"]
      env: {A: "1", B_2: "true", C: ""}
      image: img
      concurrency: 2
      timeoutSec: 0
      graceSec: 5
      resources:
        requests: {cpu: 1.5, memory: 1Gi}
        limits: {cpu: 3}
      nodeSelector: {kubernetes.io/arch: amd64}
      tolerations:
        - {key: k, operator: Equal, value: v, effect: NoSchedule, tolerationSeconds: 30}
        - {operator: Exists}
      labels: {x: y}
    - name: a2
      adapter: acpx_local
      env: {}
`, `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: bare}
spec: {id: b}
`, `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: sessions}
spec:
  id: s
  sessions: {}
  egress: {}
  agents:
    - {name: x, adapter: pi_local, env: {K: v}}
`, `apiVersion: pcsync.io/v1alpha1
kind: Company
metadata: {name: anchors}
spec:
  id: "1"
  agents:
    - &agent {name: y, adapter: gemini_local, env: &env {GEMINI_API_KEY: x}}
    - <<: *agent
      name: z
      env: *env
`}

// exportBoth validates doc and returns its JSON from the exporter (fast) and
// from MarshalJSON (slow, a Validator on the reference path).
func exportBoth(t *testing.T, fast, slow *Validator, doc *document) (a, b []byte) {
	t.Helper()
	la, errs := checkDocument(doc, fast, []string{"Settings", "Company"})
	if len(errs) > 0 {
		return nil, nil
	}
	lb, errs := checkDocument(doc, slow, []string{"Settings", "Company"})
	if len(errs) > 0 {
		t.Fatalf("%s: valid for one validator only: %v", doc.start, errs[0])
	}
	return la.json, lb.json
}

func sameJSON(t *testing.T, name string, a, b []byte) {
	t.Helper()
	decode := func(x []byte) any {
		d := json.NewDecoder(bytes.NewReader(x))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("%s: %v in %s", name, err, x)
		}
		return v
	}
	if diff := cmp.Diff(decode(b), decode(a)); diff != "" {
		t.Errorf("%s: export differs from MarshalJSON (-MarshalJSON +exporter):\n%s", name, diff)
	}
}

// TestExportMatchesMarshalJSON is the equivalence test of
// fastpath_export.go: the exporter (with defaults from the schema, and
// looked up in each document) and MarshalJSON (the reference path,
// LoadOptions.Reference) must give the same JSON values (numbers compared
// as written) for the corpus above, every config in the repository, a
// configtest fleet, and random companies.
func TestExportMatchesMarshalJSON(t *testing.T) {
	for name, mode := range map[string]exportMode{"defaults=schema": exportFull, "defaults=lookup": exportLookup} {
		t.Run(name, func(t *testing.T) { testExportMatches(t, mode) })
	}
}

func testExportMatches(t *testing.T, mode exportMode) {
	fast, err := newValidator(1, mode)
	if err != nil {
		t.Fatal(err)
	}
	slow := fast.referencePath()
	// ref lends the test a CUE context of its own for the whole test.
	ref, err := newValidator(1, mode)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ref.get()
	if err != nil {
		t.Fatal(err)
	}
	defer ref.put(w)
	check := func(name string, data []byte) int {
		docs, perr := parseYAML(name, data, parseLimits{maxNodes: 1_000_000})
		if perr != nil {
			return 0
		}
		n := 0
		for _, d := range docs {
			a, b := exportBoth(t, fast, slow, d)
			if a == nil {
				continue
			}
			n++
			sameJSON(t, fmt.Sprintf("%s#%d", name, d.index), a, b)
			// check evaluates #Kind & {document}; the definition unified
			// with the document evaluated alone must give the same bytes.
			kind, _ := d.stringAt(keys("kind"))
			u := w.defs[kind].Unify(w.ctx.BuildExpr(d.expr))
			if c, err := u.MarshalJSON(); err != nil || !bytes.Equal(c, b) {
				t.Errorf("%s#%d: #%s & {document} gives %s, the definition unified with it %s (%v)", name, d.index, kind, b, c, err)
			}
		}
		return n
	}
	for i, src := range exportCorpus {
		if check(fmt.Sprintf("corpus-%d", i), []byte(src)) != 1 {
			t.Errorf("corpus document %d is not valid", i)
		}
	}
	valid := 0
	fleet := t.TempDir()
	if err := configtest.WriteFleet(fleet, configtest.FleetOptions{Companies: 20, Cilium: true}); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{"../../testdata", "../../examples", fleet} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			valid += check(p, data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if valid < 20 {
		t.Errorf("only %d valid documents in the repository's configs", valid)
	}
	r := rand.New(rand.NewPCG(7, 8))
	n := 300
	if testing.Short() {
		n = 50
	}
	for i := range n {
		src := randomCompany(r, i)
		if check(fmt.Sprintf("random-%d", i), []byte(src)) != 1 {
			t.Fatalf("random company %d is not valid:\n%s", i, src)
		}
	}
}

// TestLoadMatchesReference runs Load on the fast path and with
// LoadOptions.Reference over every config directory of the repository
// (testdata/render, testdata/badpatches and testdata/badconfig cases,
// examples/config) and configtest fleets in both egress modes, and
// requires the same Model, or the same errors.
func TestLoadMatchesReference(t *testing.T) {
	var dirs []string
	for _, root := range []string{"../../testdata/render", "../../testdata/badpatches", "../../testdata/badconfig"} {
		entries, err := os.ReadDir(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(root, e.Name(), "config"))
			}
		}
	}
	dirs = append(dirs, "../../examples/config")
	for _, cilium := range []bool{false, true} {
		dir := t.TempDir()
		if err := configtest.WriteFleet(dir, configtest.FleetOptions{Companies: 30, Cilium: cilium}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	type loaded struct {
		Model *Model
		Err   string
	}
	load := func(dir string, opts LoadOptions) loaded {
		m, err := Load(context.Background(), dir, opts)
		if err != nil {
			return loaded{Err: err.Error()}
		}
		return loaded{Model: m}
	}
	for _, dir := range dirs {
		fast := load(dir, LoadOptions{})
		ref := load(dir, LoadOptions{Reference: true})
		if diff := cmp.Diff(ref, fast); diff != "" {
			t.Errorf("%s: Load differs from the reference (-reference +fast):\n%s", dir, diff)
		}
	}
}

// randomCompany writes a valid Company document with a random choice of
// optional fields and forms.
func randomCompany(r *rand.Rand, i int) string {
	var b strings.Builder
	pick := func(xs ...string) string { return xs[r.IntN(len(xs))] }
	maybe := func() bool { return r.IntN(2) == 0 }
	qty := func() string { return pick(`"1"`, "2", "0.5", "1.25", "250m", "2Gi", "1e3", "0", "3.0") }
	fmt.Fprintf(&b, "apiVersion: pcsync.io/v1alpha1\nkind: Company\nmetadata:\n  name: c%d\n", i)
	if maybe() {
		b.WriteString("  labels: {team: x}\n")
	}
	fmt.Fprintf(&b, "spec:\n  id: id-%d\n", i)
	if maybe() {
		var eg []string
		if maybe() {
			eg = append(eg, "    mode: "+pick("standard", "cilium"))
		}
		if maybe() {
			eg = append(eg, "    allowFqdns: [a.b]")
		}
		if maybe() {
			eg = append(eg, "    allowCidrs:")
			for range 1 + r.IntN(3) {
				switch r.IntN(4) {
				case 0:
					eg = append(eg, "      - 10.1.0.0/16")
				case 1:
					eg = append(eg, "      - {cidr: 10.2.0.0/16}")
				case 2:
					eg = append(eg, "      - {cidr: 10.3.0.0/16, ports: ["+pick("1", "443, 80", "65535")+"]}")
				default:
					eg = append(eg, "      - {cidr: 10.4.0.0/16, protocol: "+pick("TCP", "UDP", "SCTP")+"}")
				}
			}
		}
		if len(eg) == 0 {
			b.WriteString("  egress: {}\n")
		} else {
			b.WriteString("  egress:\n" + strings.Join(eg, "\n") + "\n")
		}
	}
	if maybe() {
		b.WriteString("  quota: {")
		fields := []string{}
		if maybe() {
			fields = append(fields, "pods: "+pick("0", "7"))
		}
		for _, f := range []string{"requestsCpu", "requestsMemory", "limitsCpu", "limitsMemory"} {
			if maybe() {
				fields = append(fields, f+": "+qty())
			}
		}
		b.WriteString(strings.Join(fields, ", ") + "}\n")
	}
	if maybe() {
		b.WriteString("  limitRange: {")
		var lr []string
		for _, f := range []string{"max", "min", "default", "defaultRequest"} {
			if maybe() {
				lr = append(lr, f+": {cpu: "+qty()+"}")
			}
		}
		b.WriteString(strings.Join(lr, ", ") + "}\n")
	}
	if maybe() {
		b.WriteString("  jobs: {retain: " + pick("true", "false") + "}\n")
	}
	if maybe() {
		b.WriteString("  sessions: {" + pick("", "size: 5Gi", "size: 3", "storageClassName: x") + "}\n")
	}
	if maybe() {
		b.WriteString("  secretRefs: [{name: a}" + pick("", ", {name: b, optional: false}", ", {name: c, optional: true}") + "]\n")
	}
	if maybe() {
		b.WriteString("  patches: [{patch: x}" + pick("", ", {path: y, target: {kind: Role}}", ", {patch: z, options: {allowNameChange: true}}") + "]\n")
	}
	if maybe() {
		b.WriteString("  agents:\n")
		for j := range 1 + r.IntN(3) {
			fmt.Fprintf(&b, "    - name: a%d\n      adapter: %s\n", j, pick("claude_local", "codex_local", "opencode_local"))
			if maybe() {
				b.WriteString("      env: {X: y}\n")
			}
			if maybe() {
				b.WriteString("      concurrency: 3\n")
			}
			if maybe() {
				b.WriteString("      graceSec: 0\n")
			}
			if maybe() {
				b.WriteString("      extraArgs: [a]\n")
			}
			if maybe() {
				b.WriteString("      resources: {requests: {cpu: " + qty() + "}}\n")
			}
			if maybe() {
				b.WriteString("      tolerations: [{operator: Exists, tolerationSeconds: 5}]\n")
			}
		}
	}
	return b.String()
}

// TestReadSchema checks what readSchema makes of schemas that the
// exporter must not walk, or must not take defaults from.
func TestReadSchema(t *testing.T) {
	cases := []struct {
		src        string
		exportable []string
		static     bool
	}{
		{`#A: {x: *1 | int}
#B: {y: #A}`, []string{"A", "B"}, true},
		{`import s "strings"
#A: {x: s.MinRunes(1), n: len("x")}`, []string{"A", "B"}, true},
		// A default that depends on another field.
		{`#A: {x: *1 | int, y: *x | int}`, []string{"A", "B"}, false},
		{`#A: {m: {x: 1}, y: m.x}`, []string{"A", "B"}, false},
		// A comprehension in a kind of its own that nothing refers to.
		{`#A: {x: int}
#B: {p: string, if len(p) > 3 {q: 1}}`, []string{"A"}, true},
		// One that another kind can reach.
		{`#A: {b: #B}
#B: {p: string, if len(p) > 3 {q: 1}}`, nil, false},
		{`#A: {for k, v in {a: 1} {(k): v}}`, []string{"B"}, true},
		{`x: [for v in [1] {v}]
#A: {y: int}`, nil, false},
		{`#A: {let v = 1, x: v}`, []string{"A", "B"}, false},
	}
	for i, c := range cases {
		f, err := parser.ParseFile(fmt.Sprintf("case%d.cue", i), c.src)
		if err != nil {
			t.Fatal(err)
		}
		facts := readSchema([]*ast.File{f}, []string{"A", "B"})
		var got []string
		for _, k := range []string{"A", "B"} {
			if facts.exportable[k] {
				got = append(got, k)
			}
		}
		if !reflect.DeepEqual(got, c.exportable) || (len(got) > 0 && facts.staticDefaults != c.static) {
			t.Errorf("case %d: exportable %v static %t, want %v %t", i, got, facts.staticDefaults, c.exportable, c.static)
		}
	}
}
