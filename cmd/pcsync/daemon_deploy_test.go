package main

import (
	"io"
	"os"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestDeployArgsAreDaemonFlags parses the args of deploy/base's Deployment
// with pcsync's own command line: every flag it passes exists and takes the
// value given.
func TestDeployArgsAreDaemonFlags(t *testing.T) {
	b, err := os.ReadFile("../../deploy/base/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name string   `json:"name"`
						Args []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &dep); err != nil {
		t.Fatal(err)
	}
	var args []string
	for _, c := range dep.Spec.Template.Spec.Containers {
		if c.Name == "pcsync" {
			args = c.Args
		}
	}
	if len(args) == 0 {
		t.Fatal("no pcsync container with args in deploy/base/deployment.yaml")
	}
	root := newRootCmd(io.Discard, io.Discard)
	cmd, rest, err := root.Find(args)
	if err != nil || cmd.Name() != "daemon" {
		t.Fatalf("args %v: command %q, %v", args, cmd.Name(), err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		t.Errorf("deploy/base args %v: %v", args, err)
	}
	for _, name := range []string{"config", "spool", "executor", "leader-elect", "prune", "metrics-bind-address", "log-format"} {
		if f := cmd.Flags().Lookup(name); f == nil || !f.Changed {
			t.Errorf("deploy/base does not set --%s", name)
		}
	}
}
