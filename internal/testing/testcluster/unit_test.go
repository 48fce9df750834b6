package testcluster

import (
	"bufio"
	"net/netip"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func TestVersionsMatchBuildScript(t *testing.T) {
	f, err := os.Open("../../../hack/k8sbin/versions.env")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	want := map[string]string{
		"K8S_VERSION":         KubernetesVersion,
		"K8S_STAGING_VERSION": "v0" + strings.TrimPrefix(KubernetesVersion, "v1"),
		"ETCD_VERSION":        EtcdVersion,
		"KWOK_VERSION":        KwokVersion,
		"RECIPE":              BuildRecipe,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hack/k8sbin/versions.env vs. the package constants (-want +got):\n%s", diff)
	}
}

func TestKwokStagesAreWellFormed(t *testing.T) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(kwokStages()), 4096)
	var names []string
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("decode stages: %v", err)
		}
		if doc == nil {
			continue
		}
		meta, _ := doc["metadata"].(map[string]any)
		names = append(names, meta["name"].(string))
		if doc["kind"] != "Stage" || doc["apiVersion"] != "kwok.x-k8s.io/v1alpha1" {
			t.Errorf("document %v is not a kwok Stage", meta["name"])
		}
	}
	want := []string{"pcsync-pod-start", "pcsync-pod-succeed", "pcsync-pod-fail", "pcsync-pod-image-pull", "pcsync-pod-pending", "pcsync-pod-delete"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
	if strings.Contains(kwokStages(), "${") {
		t.Errorf("unfilled placeholder in the stages")
	}
}

func TestLabelHelpersProduceValidLabels(t *testing.T) {
	sets := map[string]map[string]string{
		"SucceedAfter":     SucceedAfter(1500 * time.Millisecond),
		"FailWith":         FailWith("Error", 1, time.Second),
		"OOMKilled":        OOMKilled(0),
		"ImagePullFailure": ImagePullFailure(""),
		"Unschedulable":    Unschedulable(),
		"PendingForever":   PendingForever(),
		"RunForever":       RunForever(),
	}
	for name, labels := range sets {
		for k, v := range labels {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				t.Errorf("%s: key %q: %v", name, k, errs)
			}
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				t.Errorf("%s: value %q: %v", name, v, errs)
			}
		}
	}
	if diff := cmp.Diff(map[string]string{LabelOutcome: "fail", LabelReason: "OOMKilled", LabelExitCode: "137", LabelDelayMS: "0"}, OOMKilled(0)); diff != "" {
		t.Errorf("OOMKilled labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{LabelOutcome: "succeed", LabelDelayMS: "1500"}, SucceedAfter(1500*time.Millisecond)); diff != "" {
		t.Errorf("SucceedAfter labels (-want +got):\n%s", diff)
	}
}

func TestParseRequestCounts(t *testing.T) {
	text := `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="batch",resource="jobs",scope="namespace",subresource="status",verb="LIST",version="v1"} 12
apiserver_request_duration_seconds_bucket{le="0.1"} 5
`
	got, err := parseRequestCounts(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []RequestCount{
		{Verb: "POST", Version: "v1", Resource: "configmaps", Scope: "resource", Code: "201", Count: 3},
		{Verb: "LIST", Group: "batch", Version: "v1", Resource: "jobs", Subresource: "status", Scope: "namespace", Code: "200", Count: 12},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parsed counts (-want +got):\n%s", diff)
	}
	if !got[0].Mutating() || got[1].Mutating() {
		t.Errorf("Mutating: POST=%v LIST=%v", got[0].Mutating(), got[1].Mutating())
	}
	if _, err := parseRequestCounts(`apiserver_request_total{code="200 1`); err == nil {
		t.Error("a truncated line parsed without error")
	}
}

func TestCRILine(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	got := CRILine(ts, "stdout", "hello world")
	if ok, _ := regexp.MatchString(`^2026-01-02T03:04:05\.0000006Z stdout F hello world\n$`, got); !ok {
		t.Errorf("CRILine = %q", got)
	}
}

func TestCRIText(t *testing.T) {
	data := CRILine(time.Unix(0, 0), "stdout", "one") +
		"2026-01-02T03:04:05Z stderr P par\n" +
		"2026-01-02T03:04:05Z stderr F tial\n" +
		CRILine(time.Unix(0, 0), "stdout", "")
	if diff := cmp.Diff("one\npartial\n\n", criText([]byte(data))); diff != "" {
		t.Errorf("criText (-want +got):\n%s", diff)
	}
}

// TestServiceRangeHoldsAFleet: the Service range holds 4,096 addresses (a
// fleet of 1,000 tenants has a Service each), holds the addresses the
// cluster gives out of it (the API server's first one, which the serving
// certificate names, and the cluster DNS), and meets neither the real
// node's pod subnet nor its node IP.
func TestServiceRangeHoldsAFleet(t *testing.T) {
	svc := netip.MustParsePrefix(ServiceCIDR)
	if size := 1 << (32 - svc.Bits()); size < 4096 {
		t.Errorf("ServiceCIDR %s holds %d addresses, want at least 4,096", ServiceCIDR, size)
	}
	for _, in := range []string{"10.0.0.1", clusterDNSIP} {
		if !svc.Contains(netip.MustParseAddr(in)) {
			t.Errorf("ServiceCIDR %s does not hold %s", ServiceCIDR, in)
		}
	}
	o := DefaultRealNodeOptions()
	if svc.Overlaps(netip.MustParsePrefix(o.PodSubnet)) || svc.Contains(netip.MustParseAddr(o.NodeIP)) {
		t.Errorf("ServiceCIDR %s meets the pod subnet %s or the node IP %s", ServiceCIDR, o.PodSubnet, o.NodeIP)
	}
}
