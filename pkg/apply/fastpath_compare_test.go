package apply

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func mustObj(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatalf("bad test object: %v\n%s", err, s)
	}
	return u
}

// withOwnership returns live with a managedFields Apply entry for fm holding fields.
func withOwnership(t *testing.T, live *unstructured.Unstructured, fm, apiVersion, fields string) *unstructured.Unstructured {
	t.Helper()
	var raw json.RawMessage
	if err := json.Unmarshal([]byte(fields), &raw); err != nil {
		t.Fatalf("bad fields: %v", err)
	}
	mf := append(live.GetManagedFields(), metav1.ManagedFieldsEntry{
		Manager: fm, Operation: metav1.ManagedFieldsOperationApply, APIVersion: apiVersion,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw},
	})
	live.SetManagedFields(mf)
	return live
}

func TestUpToDate(t *testing.T) {
	const quotaDesired = `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n",
		"labels":{"a":"1"},"annotations":{"pcsync.io/applied-hash":"H"}},
		"spec":{"hard":{"pods":20,"requests.cpu":"1000m","requests.memory":"20Gi","limits.cpu":0.5}}}`
	const quotaFields = `{"f:metadata":{"f:labels":{"f:a":{}},"f:annotations":{"f:pcsync.io/applied-hash":{}}},
		"f:spec":{"f:hard":{"f:pods":{},"f:requests.cpu":{},"f:requests.memory":{},"f:limits.cpu":{}}}}`
	const quotaLive = `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","uid":"u",
		"resourceVersion":"5","labels":{"a":"1"},"annotations":{"pcsync.io/applied-hash":"H"}},
		"spec":{"hard":{"pods":"20","requests.cpu":"1","requests.memory":"20Gi","limits.cpu":"500m"}},
		"status":{"used":{"pods":"0"}}}`

	const npDesired = `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"n",
		"annotations":{"pcsync.io/applied-hash":"H"}},
		"spec":{"podSelector":{"matchLabels":{"x":"y"}},"policyTypes":["Egress"],
		"egress":[{"ports":[{"port":53,"protocol":"UDP"},{"port":443}]}]}}`
	const npFields = `{"f:metadata":{"f:annotations":{"f:pcsync.io/applied-hash":{}}},
		"f:spec":{"f:podSelector":{},"f:policyTypes":{},"f:egress":{}}}`
	const npLive = `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"n",
		"annotations":{"pcsync.io/applied-hash":"H"}},
		"spec":{"podSelector":{"matchLabels":{"x":"y"}},"policyTypes":["Egress"],
		"egress":[{"ports":[{"port":53,"protocol":"UDP"},{"port":443,"protocol":"TCP"}]}]}}`

	const saDesired = `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"s","namespace":"n",
		"annotations":{"pcsync.io/applied-hash":"H","eks.amazonaws.com/role-arn":"arn"}},
		"imagePullSecrets":[{"name":"reg"}]}`
	const saFields = `{"f:metadata":{"f:annotations":{"f:pcsync.io/applied-hash":{},"f:eks.amazonaws.com/role-arn":{}}},
		"f:imagePullSecrets":{"k:{\"name\":\"reg\"}":{".":{},"f:name":{}}}}`
	const saLive = `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"s","namespace":"n",
		"annotations":{"pcsync.io/applied-hash":"H","eks.amazonaws.com/role-arn":"arn"}},
		"imagePullSecrets":[{"name":"reg"}]}`

	tests := []struct {
		name    string
		desired string
		live    string
		fm      string // owner of the fields
		version string
		fields  string
		want    bool
	}{
		{name: "quantities and numbers normalised", desired: quotaDesired, live: quotaLive, fm: "pcsync", version: "v1",
			fields: quotaFields, want: true},
		{name: "quantity value differs", desired: quotaDesired, fm: "pcsync", version: "v1", fields: quotaFields,
			live: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","labels":{"a":"1"},
				"annotations":{"pcsync.io/applied-hash":"H"}},
				"spec":{"hard":{"pods":"21","requests.cpu":"1","requests.memory":"20Gi","limits.cpu":"500m"}}}`},
		{name: "label values are not quantities", fm: "pcsync", version: "v1", fields: quotaFields,
			desired: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","labels":{"a":"1.0"},
				"annotations":{"pcsync.io/applied-hash":"H"}},"spec":{}}`,
			live: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","labels":{"a":"1"},
				"annotations":{"pcsync.io/applied-hash":"H"}},"spec":{}}`},
		{name: "hash differs", desired: quotaDesired, fm: "pcsync", version: "v1", fields: quotaFields,
			live: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","labels":{"a":"1"},
				"annotations":{"pcsync.io/applied-hash":"OLD"}},
				"spec":{"hard":{"pods":"20","requests.cpu":"1","requests.memory":"20Gi","limits.cpu":"500m"}}}`},
		{name: "owned by another manager", desired: quotaDesired, live: quotaLive, fm: "kubectl", version: "v1",
			fields: quotaFields},
		{name: "applied with another version", desired: quotaDesired, live: quotaLive, fm: "pcsync", version: "v2",
			fields: quotaFields},
		{name: "one field taken over", desired: quotaDesired, live: quotaLive, fm: "pcsync", version: "v1",
			fields: `{"f:metadata":{"f:labels":{"f:a":{}},"f:annotations":{"f:pcsync.io/applied-hash":{}}},
				"f:spec":{"f:hard":{"f:pods":{},"f:requests.memory":{},"f:limits.cpu":{}}}}`},
		{name: "server default inside atomic list", desired: npDesired, live: npLive, fm: "pcsync",
			version: "networking.k8s.io/v1", fields: npFields, want: true},
		{name: "list element removed by someone", desired: npDesired, fm: "pcsync", version: "networking.k8s.io/v1",
			fields: npFields,
			live: `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"n",
				"annotations":{"pcsync.io/applied-hash":"H"}},
				"spec":{"podSelector":{"matchLabels":{"x":"y"}},"policyTypes":["Egress"],
				"egress":[{"ports":[{"port":53,"protocol":"UDP"}]}]}}`},
		{name: "int and string differ as ports", desired: npDesired, fm: "pcsync", version: "networking.k8s.io/v1",
			fields: npFields,
			live: `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"p","namespace":"n",
				"annotations":{"pcsync.io/applied-hash":"H"}},
				"spec":{"podSelector":{"matchLabels":{"x":"y"}},"policyTypes":["Egress"],
				"egress":[{"ports":[{"port":"dns","protocol":"UDP"},{"port":443,"protocol":"TCP"}]}]}}`},
		{name: "associative list keys", desired: saDesired, live: saLive, fm: "pcsync", version: "v1", fields: saFields,
			want: true},
		{name: "associative list element not owned", desired: saDesired, live: saLive, fm: "pcsync", version: "v1",
			fields: `{"f:metadata":{"f:annotations":{"f:pcsync.io/applied-hash":{},"f:eks.amazonaws.com/role-arn":{}}},
				"f:imagePullSecrets":{"k:{\"name\":\"other\"}":{".":{},"f:name":{}}}}`},
		{name: "empty values the server drops", fm: "pcsync", version: "v1",
			fields: `{"f:metadata":{"f:annotations":{"f:pcsync.io/applied-hash":{}}},"f:spec":{"f:hard":{}}}`,
			desired: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n","labels":{},
				"annotations":{"pcsync.io/applied-hash":"H"}},"spec":{"hard":{},"scopes":[]}}`,
			live: `{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"n",
				"annotations":{"pcsync.io/applied-hash":"H"}},"spec":{}}`, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := withOwnership(t, mustObj(t, tt.live), tt.fm, tt.version, tt.fields)
			got, why := liveUpToDate(mustObj(t, tt.desired), live, "pcsync")
			if got != tt.want {
				t.Errorf("liveUpToDate = %v (%s), want %v", got, why, tt.want)
			}
		})
	}
}

func TestScalarEqual(t *testing.T) {
	tests := []struct {
		d, l       any
		inMetadata bool
		want       bool
	}{
		{int64(1), float64(1), false, true},
		{"1", "1000m", false, true},
		{"2Gi", "2048Mi", false, true},
		{int64(20), "20", false, true},
		{0.5, "500m", false, true},
		{int64(20), "20", true, false},
		{"1", "1000m", true, false},
		{"abc", "abd", false, false},
		{true, true, false, true},
		{true, "true", false, false},
	}
	for _, tt := range tests {
		if got := scalarEqual(tt.d, tt.l, tt.inMetadata); got != tt.want {
			t.Errorf("scalarEqual(%#v, %#v, %v) = %v, want %v", tt.d, tt.l, tt.inMetadata, got, tt.want)
		}
	}
}
