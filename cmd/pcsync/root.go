package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/pcsync/pcsync/internal/lib/kube"
	"github.com/pcsync/pcsync/internal/lib/leader"
	"github.com/pcsync/pcsync/pkg/apply"
	"github.com/pcsync/pcsync/pkg/config"
	"github.com/pcsync/pcsync/pkg/fastpath"
	"github.com/pcsync/pcsync/pkg/render"
)

// globalOptions are the settings every command shares.
type globalOptions struct {
	// Kube is the cluster access (--kubeconfig, --context, ...), registered
	// as persistent flags.
	Kube kube.Flags
	// Stdout receives a command's output; Stderr its errors, warnings and
	// logs.
	Stdout, Stderr io.Writer
	// Logger logs to Stderr at --log-level in --log-format.
	Logger *slog.Logger

	logLevel  string
	logFormat string
	// reference turns every fast path to its reference (--reference-paths,
	// or PCSYNC_REFERENCE_PATHS; see package fastpath).
	reference fastpath.Reference
	// images is where pcsync's own images are unless Settings says: the
	// daemon sets it from the pod it runs in (imageDefaults).
	images config.ImageDefaults
	// wrapTransport, when set, wraps the transport of every client config
	// (the daemon counts its API requests so).
	wrapTransport func(http.RoundTripper) http.RoundTripper
}

// restConfig is the cluster's client config from --kubeconfig and the
// other Kube flags, its transport wrapped by wrapTransport.
func (g *globalOptions) restConfig() (*rest.Config, error) {
	cfg, err := g.Kube.RESTConfig()
	if err != nil {
		return nil, err
	}
	if g.wrapTransport != nil {
		cfg.Wrap(g.wrapTransport)
	}
	return cfg, nil
}

// referencePathsEnv is the environment variable that sets --reference-paths
// for a process started without it (the daemon in a Deployment).
const referencePathsEnv = "PCSYNC_REFERENCE_PATHS"

// subcommands lists the commands of pcsync. Each command lives in its own
// file; add a command here when its file lands.
func subcommands(g *globalOptions) []*cobra.Command {
	return []*cobra.Command{
		newValidateCmd(g),
		newRenderCmd(g),
		newVersionCmd(g),
		newDiffCmd(g),
		newApplyCmd(g),
		newDaemonCmd(g),
		newGetCmd(g),
		newReconcileCmd(g),
		newRunsCmd(g),
		newSchemaCmd(g),
		newDoctorCmd(g),
		newSandboxServerCmd(g),
		newInitCmd(g),
		newEgressProxyCmd(g),
		newNetprobeCmd(g),
		newPaperclipCmd(g),
	}
}

// newRootCmd builds the pcsync command tree.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globalOptions{Kube: kube.DefaultFlags(), Stdout: stdout, Stderr: stderr}
	g.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	return newRootCmdFor(g)
}

// newRootCmdFor builds the pcsync command tree around g.
func newRootCmdFor(g *globalOptions) *cobra.Command {
	root := &cobra.Command{
		Use:   "pcsync",
		Short: "Keep Kubernetes tenants of AI coding-agent companies in the shape a Git repository describes",
		Long: `pcsync validates a directory of YAML (Settings and Company documents) against its
CUE schema, renders per-company tenant manifests through kustomize, applies them
with server-side apply, and runs agent work as Kubernetes Jobs.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what pcsync version does.
		Version: versionLine(),
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.referenceFromEnv(cmd); err != nil {
				return err
			}
			return g.setupLogger()
		},
	}
	root.SetOut(g.Stdout)
	root.SetErr(g.Stderr)
	root.SetVersionTemplate("{{.Version}}\n")
	// Defined here so that cobra gives it no -v, which kubectl's users
	// know as a log level.
	root.Flags().Bool("version", false, "print pcsync's version, as pcsync version does")
	g.Kube.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	setFlagValues(root.PersistentFlags(), "log-level", "debug", "info", "warn", "error")
	setFlagValues(root.PersistentFlags(), "log-format", "text", "json")
	root.PersistentFlags().BoolVar((*bool)(&g.reference), "reference-paths", false,
		"debug: take the reference implementation of every fast path (same output, slower; see docs/design.md)")
	_ = root.PersistentFlags().MarkHidden("reference-paths")
	root.AddCommand(subcommands(g)...)
	registerCompletions(g, root)
	return root
}

// referenceFromEnv sets g.reference from PCSYNC_REFERENCE_PATHS (a boolean:
// 1, true, 0, false) unless --reference-paths was given.
func (g *globalOptions) referenceFromEnv(cmd *cobra.Command) error {
	v, ok := os.LookupEnv(referencePathsEnv)
	if !ok || v == "" || cmd.Flags().Changed("reference-paths") {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return usageErrorf("%s=%q: want 1 or 0 (true or false)", referencePathsEnv, v)
	}
	g.reference = fastpath.Reference(b)
	return nil
}

func (g *globalOptions) setupLogger() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return usageErrorf("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(g.logFormat) {
	case "text":
		g.Logger = slog.New(slog.NewTextHandler(g.Stderr, opts))
	case "json":
		g.Logger = slog.New(slog.NewJSONHandler(g.Stderr, opts))
	default:
		return usageErrorf("--log-format %q: want text or json", g.logFormat)
	}
	return nil
}

// run executes pcsync with args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWithStdin(ctx, args, nil, stdout, stderr)
}

// runWithStdin is run reading standard input from stdin (nil: os.Stdin).
func runWithStdin(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetIn(stdin)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	var ee *exitError
	if err != nil && !(errors.As(err, &ee) && ee.reported) {
		fmt.Fprintf(stderr, "pcsync: %v\n", err)
	}
	return exitCode(err)
}

// loadAndRender loads dir, prints every config error as one line to
// Stderr and the warnings too, and returns the render output. Invalid
// config (including a patch kustomize cannot apply) returns an error for
// which exitCode is 1, already reported.
func (g *globalOptions) loadAndRender(ctx context.Context, dir, applySetNamespace string) (*render.Output, error) {
	_, out, err := g.loadModelAndRender(ctx, dir, applySetNamespace)
	return out, err
}

// loadOptions are the config.LoadOptions of every command: the namespace
// pcsync runs in and, for a command with an ApplySet ("" for none), the
// parent's namespace are refused as tenant namespaces.
func (g *globalOptions) loadOptions(applySetNamespace string) config.LoadOptions {
	o := config.DefaultLoadOptions()
	o.Reference = g.reference
	o.Images = cmp.Or(g.images, imageDefaults(nil))
	o.ProtectedNamespaces = map[string]string{}
	if ns := leader.PodNamespace(); ns != "" {
		o.ProtectedNamespaces[ns] = "the namespace pcsync runs in ($POD_NAMESPACE, else its service account's)"
	}
	if applySetNamespace != "" {
		o.ProtectedNamespaces[applySetNamespace] = "the ApplySet parent's namespace (--applyset-namespace)"
	}
	return o
}

// renderOptions are the render.Options of every command.
func (g *globalOptions) renderOptions() render.Options {
	o := render.DefaultOptions()
	o.Reference = g.reference
	return o
}

// managerOptions are the apply.ManagerOptions that every command starts from.
func (g *globalOptions) managerOptions() apply.ManagerOptions {
	o := apply.DefaultManagerOptions()
	o.Reference = g.reference
	return o
}

// loadModelAndRender is loadAndRender that also returns the model.
func (g *globalOptions) loadModelAndRender(ctx context.Context, dir, applySetNamespace string) (*config.Model, *render.Output, error) {
	return g.renderModel(config.Load(ctx, dir, g.loadOptions(applySetNamespace)))
}

// renderModel reports the error of a load, or renders its model m and
// prints the warnings, as loadModelAndRender.
func (g *globalOptions) renderModel(m *config.Model, err error) (*config.Model, *render.Output, error) {
	if err != nil {
		return nil, nil, g.reportConfigError(err)
	}
	out, err := render.Render(m, g.renderOptions())
	if err != nil {
		return nil, nil, g.reportConfigError(err)
	}
	for _, w := range out.Warnings {
		fmt.Fprintln(g.Stderr, w)
	}
	return m, out, nil
}

// reportConfigError prints each line of an invalid config and turns it
// into exit code 1; other errors pass through (exit code 2).
func (g *globalOptions) reportConfigError(err error) error {
	var ce *config.Errors
	if !errors.As(err, &ce) {
		return err
	}
	for _, line := range ce.Lines() {
		fmt.Fprintln(g.Stderr, line)
	}
	n := len(ce.List)
	noun := "errors"
	if n == 1 {
		noun = "error"
	}
	fmt.Fprintf(g.Stderr, "pcsync: invalid config: %d %s\n", n, noun)
	return &exitError{code: 1, err: err, reported: true}
}

// exitError carries a command's exit code: 1 for invalid config or (diff)
// differences found, 2 or more for other failures.
type exitError struct {
	code int
	err  error
	// reported says the error was already printed.
	reported bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errDifferences is what diff returns (in an exitError with code 1) when
// the cluster differs from the config.
var errDifferences = errors.New("differences found")

// usageErrorf is a command-line mistake: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// exitCode maps a command's error to the process exit code: 0 ok, 1
// invalid config or differences found, 2 anything else.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ce *config.Errors
	if errors.As(err, &ce) {
		return 1
	}
	return 2
}

// dirArg is the config directory argument, "." when absent.
func dirArg(args []string) string {
	if len(args) > 0 {
		return args[0]
	}
	return "."
}
