// Package monitoring checks deploy/monitoring, pcsync's monitoring for
// Prometheus and Grafana: the alert rules (rules.yaml, and
// prometheusrule.yaml for prometheus-operator), a ServiceMonitor, a
// PodMonitor and a Grafana dashboard. Its tests keep the two rule files
// equal, check the dashboard against Grafana's dashboard model and the
// ServiceMonitor against deploy/base; with the integration tag, promtool
// checks the rules and runs their unit tests (rules_test.yaml, here), and a
// real Prometheus scrapes a real daemon (docs/daemon.md, "Monitoring").
package monitoring
