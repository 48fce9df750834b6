//go:build integration

package realnode

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/pcsync/pcsync/internal/testing/testcluster"
	"github.com/pcsync/pcsync/internal/testing/testnet"
)

// placement is where a test's pods run: the real node's nodeSelector and
// toleration, as YAML flow values for a config document.
type placement struct {
	Sel, Tol string
}

func placementOf(node *testcluster.RealNode) placement {
	tol := node.Toleration()
	sel, _ := json.Marshal(node.NodeSelector())
	return placement{Sel: string(sel), Tol: fmt.Sprintf("[{key: %q, operator: %s, effect: %s}]", tol.Key, tol.Operator, tol.Effect)}
}

// Agent is an agent entry of a Company's spec.agents on the real node:
// fields is its own (name, adapter, …) without braces.
func (p placement) Agent(fields string) string {
	return fmt.Sprintf("    - {%s, nodeSelector: %s, tolerations: %s}\n", fields, p.Sel, p.Tol)
}

// testSettings is the Settings document of a test: its namespace prefix,
// pcsync's images from registry (the node's registry allowed), the extra
// spec lines (each "  key: value\n"), a small LimitRange minimum and the
// agents' default resources with limits (a YAML flow map).
func testSettings(prefix, registry string, node *testcluster.RealNode, limits string, extra ...string) string {
	return fmt.Sprintf("apiVersion: pcsync.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\nspec:\n"+
		"  namespacePrefix: %s\n  images: {registry: %s, allowList: ['%s/*/*']}\n%s"+
		"  defaults:\n    limitRange: {min: {cpu: 10m, memory: 16Mi}}\n    resources: {requests: {cpu: 20m, memory: 32Mi}, limits: %s}\n",
		prefix, registry, node.Registry().Host(), strings.Join(extra, ""), limits)
}

// proxyPatch is a Company's spec.patches entry for its egress proxy's
// Deployment: on the real node, hosts resolved to the test network's public
// address (the stand-ins), trusting the stand-ins' CA (the test-ca
// ConfigMap) when ca is set, with containers (patch list items, indented
// as "                - name: …") added beside the proxy.
func proxyPatch(p placement, hosts []string, ca bool, containers string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `    - target: {kind: Deployment, name: paperclip-egress-proxy}
      patch: |
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: paperclip-egress-proxy}
        spec:
          template:
            spec:
              nodeSelector: %s
              tolerations: %s
              hostAliases:
                - ip: %s
                  hostnames: [%s]
`, p.Sel, p.Tol, testnet.PublicAddress, strings.Join(hosts, ", "))
	if ca {
		b.WriteString(`              volumes:
                - name: test-ca
                  configMap: {name: test-ca}
`)
	}
	if ca || containers != "" {
		b.WriteString("              containers:\n")
	}
	if ca {
		b.WriteString(`                - name: egress-proxy
                  env:
                    - {name: SSL_CERT_FILE, value: /etc/test-ca/ca.pem}
                  volumeMounts:
                    - {name: test-ca, mountPath: /etc/test-ca, readOnly: true}
`)
	}
	b.WriteString(containers)
	return b.String()
}

// relayContainerPatch is proxyPatch's container of the bare CONNECT relay
// (/pause -relay) beside the proxy: the floor of a proxy on that hop, on
// benchRelayPort, to the stand-in's port 443.
func relayContainerPatch(pauseImage string) string {
	return fmt.Sprintf(`                - name: relay
                  image: %s
                  command: [/pause, -relay, '%d=%s:443']
                  ports: [{name: relay, containerPort: %d}]
                  resources: {requests: {cpu: 100m, memory: 16Mi}, limits: {cpu: 500m, memory: 64Mi}}
                  securityContext:
                    runAsNonRoot: true
                    runAsUser: 65532
                    allowPrivilegeEscalation: false
                    capabilities: {drop: [ALL]}
                    seccompProfile: {type: RuntimeDefault}
`, pauseImage, benchRelayPort, testnet.PublicAddress, benchRelayPort)
}

// relayServicePatch is the patches entry that adds the relay's port to
// the proxy's Service.
func relayServicePatch() string {
	return fmt.Sprintf(`    - target: {kind: Service, name: paperclip-egress-proxy}
      patch: |
        apiVersion: v1
        kind: Service
        metadata: {name: paperclip-egress-proxy}
        spec:
          ports: [{name: relay, port: %d, targetPort: relay, protocol: TCP}]
`, benchRelayPort)
}

// deployNode is the real node of a test that runs pcsync's own pods (deploy/
// overlays), and the address pods reach the API server at; either missing
// fails the test.
func deployNode(t *testing.T) (c *testcluster.Cluster, node *testcluster.RealNode, apiHost, apiPort string) {
	t.Helper()
	c = testcluster.Get(t)
	if node = c.RealNode(); node == nil {
		t.Fatal("the cluster has no real node (TestMain sets Options.RealNode)")
	}
	if apiHost, apiPort = node.APIServerHost(); apiHost == "" {
		t.Fatal("the real node has no API server address for pods (RealNode.APIServerHost)")
	}
	return c, node, apiHost, apiPort
}

// randomSuffix is 6 random hex digits, for names the test makes.
func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
