package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/pcsync/pcsync/internal/testing/docwalk"
)

// The user's docs (README.md and docs/, but docs/development/, which is
// for contributors, and docs/design.md, the contract) are read by people
// who want to get a job done: they stay short enough to read (issue 55).
// Words are counted as `wc -w` counts them.
const (
	maxUserWords   = 30000
	maxPageWords   = 5000
	maxReadmeWords = 1500
)

// userDoc reports whether the markdown file rel (relative to the
// repository, with slashes) is one of the user's docs.
func userDoc(rel string) bool {
	if rel == "README.md" {
		return true
	}
	return strings.HasPrefix(rel, "docs/") && !strings.HasPrefix(rel, "docs/development/") && rel != "docs/design.md"
}

// markdownFiles returns the markdown files whose links are checked:
// README.md, every .md under docs/ and every README.md under deploy/,
// relative to the repository, with slashes, sorted.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	out := []string{"README.md"}
	for _, top := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(repoRoot, p)
			rel = filepath.ToSlash(rel)
			if (top == "docs" && strings.HasSuffix(rel, ".md")) || (top == "deploy" && d.Name() == "README.md") {
				out = append(out, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}

func readDoc(t *testing.T, rel string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestDocsLength: the user's docs total at most maxUserWords words, no
// page has more than maxPageWords and README.md no more than
// maxReadmeWords. Proofs, benchmark figures and history go to
// docs/development/.
func TestDocsLength(t *testing.T) {
	total := 0
	var pages []string
	for _, rel := range markdownFiles(t) {
		if !userDoc(rel) {
			continue
		}
		n := len(strings.Fields(readDoc(t, rel)))
		total += n
		pages = append(pages, fmt.Sprintf("%6d %s", n, rel))
		limit := maxPageWords
		if rel == "README.md" {
			limit = maxReadmeWords
		}
		if n > limit {
			t.Errorf("%s has %d words, more than %d: move proofs, figures and history to docs/development/, or split the page", rel, n, limit)
		}
	}
	t.Logf("the user's docs:\n%s\n%6d in all", strings.Join(pages, "\n"), total)
	if total > maxUserWords {
		t.Errorf("the user's docs have %d words in all, more than %d", total, maxUserWords)
	}
}

// TestDocsLinks: every relative link of README.md, docs/ and deploy/'s
// READMEs leads to a file or directory of the repository, and every
// #anchor to a heading of the markdown file it names.
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := anchors[rel]; ok {
			return a
		}
		a := headingAnchors(readDoc(t, rel))
		anchors[rel] = a
		return a
	}
	for _, rel := range markdownFiles(t) {
		for _, l := range links(readDoc(t, rel)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(l.target, "#")
			dest := rel
			if path != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(rel), path)))
				if strings.HasPrefix(dest, "../") {
					t.Errorf("%s:%d: link %q leads out of the repository", rel, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s:%d: link %q: %s does not exist", rel, l.line, l.target, dest)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !anchorsOf(dest)[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", rel, l.line, l.target, dest, anchor)
			}
		}
	}
}

// TestDocsNewTagQuoted: every kustomize newTag the docs tell a user to
// write is quoted, as deploy's TestWalkthroughTagsQuoted asks of the pages
// it knows: `make -s version` may give a tag of digits only, which YAML
// reads as a number and kustomize refuses.
func TestDocsNewTagQuoted(t *testing.T) {
	tagLine := regexp.MustCompile(`^\s*newTag:\s*(\S.*)$`)
	for _, rel := range markdownFiles(t) {
		for i, line := range strings.Split(readDoc(t, rel), "\n") {
			if m := tagLine.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], `"`) && !strings.HasPrefix(m[1], `'`) {
				t.Errorf("%s:%d: newTag %s is not quoted", rel, i+1, m[1])
			}
		}
	}
}

// walkthroughRef finds the docs sections that tests follow word for word
// (internal/testing/docwalk): a doc, a heading and, when given, the count
// of shell blocks, as the tests' walkthrough literals name them.
var walkthroughRef = regexp.MustCompile(`doc:\s*"([^"]+)",\s*heading:\s*"([^"]+)"(?:,\s*blocks:\s*(\d+))?`)

// TestDocsWalkthroughsFound: each section a walkthrough test follows is
// where the test looks for it, with the number of shell blocks it
// expects, so that an edit of the docs that would break those tests (which
// run only with -tags integration) fails here, in the unit tests.
func TestDocsWalkthroughsFound(t *testing.T) {
	found := 0
	err := filepath.WalkDir(filepath.Join(repoRoot, "test"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range walkthroughRef.FindAllStringSubmatch(string(data), -1) {
			found++
			doc := filepath.Join(repoRoot, filepath.FromSlash(m[1]))
			blocks, err := docwalk.ShellBlocks(doc, m[2])
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(p), err)
				continue
			}
			// Without blocks, the walkthrough is test/realnode's, whose
			// harness follows one shell block (docwalk.Script(…, 1, …)).
			want := 1
			if m[3] != "" {
				want, _ = strconv.Atoi(m[3])
			}
			if len(blocks) != want {
				t.Errorf("%s: %s %q has %d shell blocks, the test follows %d", filepath.Base(p), m[1], m[2], len(blocks), want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Fatal("no walkthrough test found under test/ (doc: …, heading: …)")
	}
}

// link is a markdown link's target and the line it is on.
type link struct {
	target string
	line   int
}

var inlineLink = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)

// links returns the inline links (and images) of a markdown text, leaving
// out fenced code blocks and code spans.
func links(doc string) []link {
	var out []link
	for i, line := range proseLines(doc) {
		for _, m := range inlineLink.FindAllStringSubmatch(stripCodeSpans(line), -1) {
			out = append(out, link{target: m[1], line: i + 1})
		}
	}
	return out
}

// proseLines returns the lines of doc with those of fenced code blocks
// (and the fences) blanked, so that line numbers stay.
func proseLines(doc string) []string {
	lines := strings.Split(doc, "\n")
	fence := ""
	for i, line := range lines {
		trimmed := strings.TrimLeft(line, " ")
		switch {
		case fence != "":
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
			lines[i] = ""
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			n := len(trimmed) - len(strings.TrimLeft(trimmed, trimmed[:1]))
			fence = trimmed[:n]
			lines[i] = ""
		}
	}
	return lines
}

// stripCodeSpans removes `code spans` from a line.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		n := len(line[i:]) - len(strings.TrimLeft(line[i:], "`"))
		ticks := line[i : i+n]
		rest := line[i+n:]
		j := strings.Index(rest, ticks)
		if j < 0 {
			b.WriteString(ticks)
			line = rest
			continue
		}
		line = rest[j+n:]
	}
}

var (
	headingLine = regexp.MustCompile(`^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	linkText    = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// headingAnchors returns the anchors GitHub gives the headings of a
// markdown text (and its <a id> anchors).
func headingAnchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, line := range proseLines(doc) {
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := slugify(m[2])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugify is GitHub's anchor of a heading's text: links become their text,
// then lower case, every character but letters, digits, '_', '-' and
// spaces dropped, spaces made '-'.
func slugify(heading string) string {
	heading = linkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsHelpers: the anchors and links the checks above read.
func TestDocsHelpers(t *testing.T) {
	for heading, want := range map[string]string{
		"Walkthrough: deploy/base on your cluster":                       "walkthrough-deploybase-on-your-cluster",
		"Sandbox environments: Paperclip's stock adapters on Kubernetes": "sandbox-environments-paperclips-stock-adapters-on-kubernetes",
		"`pcsync doctor`":                               "pcsync-doctor",
		"3. Configure an agent":                         "3-configure-an-agent",
		"Keys held by the proxy: `spec.credentials`":    "keys-held-by-the-proxy-speccredentials",
		"[deploy/paperclip](../deploy/paperclip) notes": "deploypaperclip-notes",
	} {
		if got := slugify(heading); got != want {
			t.Errorf("slugify(%q) = %q, want %q", heading, got, want)
		}
	}
	doc := "# A\n\n## A\n\n[x](b.md#c) and `[y](code.md)`\n\n```sh\n# not a heading\n[z](fenced.md)\n```\n![i](p.png \"title\")\n"
	if got := headingAnchors(doc); !got["a"] || !got["a-1"] || got["not-a-heading"] {
		t.Errorf("headingAnchors = %v, want a and a-1 only", got)
	}
	got := links(doc)
	want := []link{{"b.md#c", 5}, {"p.png", 11}}
	if !slices.Equal(got, want) {
		t.Errorf("links = %v, want %v", got, want)
	}
}
