package paperclip

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/pcsync/pcsync/pkg/config"
)

// SandboxProvider is the sandbox provider key of pcsync's plugin
// (integrations/paperclip-sandbox).
const SandboxProvider = "pcsync"

// envPlaceholder prefixes a desired agent's defaultEnvironmentId until the
// environment's id is known.
const envPlaceholder = "environment:"

// DesiredEnvironment is a sandbox environment of provider "pcsync" as the
// config declares it.
type DesiredEnvironment struct {
	// Name is the environment's name in Paperclip.
	Name string
	// Config is its driver config (provider, company and what is declared).
	Config map[string]any
}

// EnvironmentResult is what happened to one environment.
type EnvironmentResult struct {
	Name, ID string
	Verb     Verb
	// Changes are the config keys that differ (their paths "config.<key>").
	Changes []Change
	Err     error
}

// desireEnvironments returns the company's declared environments.
func desireEnvironments(c *config.Company) []DesiredEnvironment {
	var out []DesiredEnvironment
	for _, e := range c.Spec.Paperclip.Environments {
		cfg := map[string]any{"provider": SandboxProvider, "company": c.Slug()}
		if e.Image != "" {
			cfg["image"] = e.Image
		}
		if e.LeaseTTLSec != nil {
			cfg["leaseTtlSec"] = float64(*e.LeaseTTLSec)
		}
		if e.TimeoutMs != nil {
			cfg["timeoutMs"] = float64(*e.TimeoutMs)
		}
		if len(e.EnvAllow) > 0 {
			cfg["envAllow"] = normalize(e.EnvAllow)
		}
		if e.SocketPath != "" {
			cfg["socketPath"] = e.SocketPath
		}
		if e.Prestart != nil {
			cfg["prestart"] = *e.Prestart
		}
		if e.ReuseLease != nil {
			cfg["reuseLease"] = *e.ReuseLease
		}
		if e.RunnerLifecycleMode != "" {
			cfg["runnerLifecycleMode"] = e.RunnerLifecycleMode
		}
		out = append(out, DesiredEnvironment{Name: e.Name, Config: cfg})
	}
	return out
}

// stockAdapterType is Paperclip's adapter type of a pcsync adapter type:
// the same name, but cursor_local, which Paperclip calls cursor.
func stockAdapterType(t config.AdapterType) string {
	if t == "cursor_local" {
		return "cursor"
	}
	return string(t)
}

// environmentMarker is what pcsync keeps in a managed environment's
// metadata under MarkerKey.
func environmentMarker(name string) map[string]any {
	return map[string]any{"managedBy": managedBy, "environment": name}
}

// markedEnvironment returns the name in an environment's pcsync marker.
func markedEnvironment(e *Environment) (string, bool) {
	m, ok := e.Metadata[MarkerKey].(map[string]any)
	if !ok || m["managedBy"] != managedBy {
		return "", false
	}
	name, ok := m["environment"].(string)
	return name, ok
}

// ensureEnvironments makes the company's declared environments exist in
// Paperclip as declared (found by pcsync's marker, never by name; only the
// declared config keys are compared) and returns their ids by name. With
// dryRun it writes nothing; an environment still to create then has no id.
// An environment the config no longer declares is left as it is: pcsync
// stops managing it, and agents moved off it run where the config says.
func (r *Reconciler) ensureEnvironments(ctx context.Context, c *Client, dc DesiredCompany, dryRun bool) (map[string]string, []EnvironmentResult, error) {
	ids := map[string]string{}
	if len(dc.Environments) == 0 {
		return ids, nil, nil
	}
	live, err := c.ListEnvironments(ctx, dc.ID)
	if err != nil {
		return nil, nil, fmt.Errorf("paperclip company %s (id %s): list environments failed: %w", dc.Slug, dc.ID, err)
	}
	byName := map[string]*Environment{}
	for i := range live {
		if name, ok := markedEnvironment(&live[i]); ok {
			byName[name] = &live[i]
		}
	}
	var out []EnvironmentResult
	for _, d := range dc.Environments {
		res := EnvironmentResult{Name: d.Name, Verb: VerbNone}
		prefix := fmt.Sprintf("paperclip environment %s/%s", dc.Slug, d.Name)
		e := byName[d.Name]
		switch {
		case e == nil:
			res.Verb = VerbCreate
			for _, k := range slices.Sorted(maps.Keys(d.Config)) {
				res.Changes = append(res.Changes, Change{Path: "config." + k, To: d.Config[k]})
			}
			if !dryRun {
				created, err := c.CreateEnvironment(ctx, dc.ID, map[string]any{
					"name": d.Name, "driver": "sandbox", "config": d.Config,
					"metadata": map[string]any{MarkerKey: environmentMarker(d.Name)},
				})
				if err != nil {
					res.Err = fmt.Errorf("%s: create failed: %w", prefix, err)
				} else {
					res.ID = created.ID
				}
			}
		default:
			res.ID = e.ID
			merged := cloneMap(e.Config)
			for _, k := range slices.Sorted(maps.Keys(d.Config)) {
				if !reflect.DeepEqual(normalize(e.Config[k]), d.Config[k]) {
					res.Changes = append(res.Changes, Change{Path: "config." + k, From: e.Config[k], To: d.Config[k]})
				}
				merged[k] = d.Config[k]
			}
			if e.Name != d.Name {
				res.Changes = append(res.Changes, Change{Path: "name", From: e.Name, To: d.Name})
			}
			if len(res.Changes) > 0 {
				res.Verb = VerbUpdate
				if !dryRun {
					if _, err := c.UpdateEnvironment(ctx, dc.ID, e.ID, map[string]any{"name": d.Name, "config": merged}); err != nil {
						res.Err = fmt.Errorf("%s (id %s): update failed: %w", prefix, e.ID, err)
					}
				}
			}
		}
		if res.ID != "" {
			ids[d.Name] = res.ID
		}
		if res.Err == nil && !dryRun && res.Verb != VerbNone {
			r.opts.Logger.Info("paperclip environment "+map[Verb]string{VerbCreate: "created", VerbUpdate: "configured"}[res.Verb],
				"company", dc.Slug, "environment", d.Name, "id", res.ID)
		}
		out = append(out, res)
	}
	return ids, out, nil
}

// resolveEnvironments puts the environments' ids into the agents' desired
// defaultEnvironmentId; an environment without an id yet (a dry run) keeps
// a readable placeholder.
func resolveEnvironments(dc *DesiredCompany, ids map[string]string) {
	for i := range dc.Agents {
		v, ok := dc.Agents[i].Fields["defaultEnvironmentId"].(string)
		if !ok || len(v) <= len(envPlaceholder) || v[:len(envPlaceholder)] != envPlaceholder {
			continue
		}
		name := v[len(envPlaceholder):]
		if id, ok := ids[name]; ok {
			dc.Agents[i].Fields["defaultEnvironmentId"] = id
		} else {
			dc.Agents[i].Fields["defaultEnvironmentId"] = "(environment " + name + ", to be created)"
		}
	}
}
