package main

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// alert is one alert of the PrometheusRule.
type alert struct {
	name, expr, forDur, severity, summary, runbook string
}

// runbookBase is where the rules' runbook URLs point: the docs on GitHub.
const runbookBase = "https://github.com/pcsync/pcsync/blob/main/docs/"

// parseAlerts reads the alerts of a PrometheusRule, in its order; an alert
// without a severity or a runbook of these docs is an error.
func parseAlerts(data []byte) ([]alert, error) {
	var pr struct {
		Kind string `json:"kind"`
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert       string            `json:"alert"`
					Expr        string            `json:"expr"`
					For         string            `json:"for"`
					Labels      map[string]string `json:"labels"`
					Annotations map[string]string `json:"annotations"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		return nil, err
	}
	if pr.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("kind %q, want PrometheusRule", pr.Kind)
	}
	var out []alert
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			a := alert{name: r.Alert, expr: strings.Join(strings.Fields(r.Expr), " "), forDur: r.For,
				severity: r.Labels["severity"], summary: r.Annotations["summary"]}
			page, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
			if a.severity == "" || !ok {
				return nil, fmt.Errorf("alert %s: labels.severity and an annotations.runbook_url under %s are required", r.Alert, runbookBase)
			}
			a.runbook = page
			out = append(out, a)
		}
	}
	return out, nil
}

// writeAlerts writes a table of the alerts, each named by a link to its
// runbook.
func writeAlerts(b *strings.Builder, alerts []alert) {
	b.WriteString("| alert | severity | for | expression | summary |\n|---|---|---|---|---|\n")
	for _, a := range alerts {
		fmt.Fprintf(b, "| [%s](%s) | %s | %s | `%s` | %s |\n", a.name, a.runbook, a.severity, a.forDur, cell(a.expr), cell(a.summary))
	}
	b.WriteString("\n")
}
