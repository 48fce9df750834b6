package agentpod

import (
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLabelValue(t *testing.T) {
	validRE := regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
	tests := []struct{ in, want string }{
		{"claude_local", "claude_local"},
		{"Globex Corp/R&D #7", "Globex-Corp-R-D--7"},
		{"-x-", "x"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := LabelValue(tt.in); got != tt.want {
			t.Errorf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := strings.Repeat("u", 80)
	for _, s := range []string{long + "1", long + "2", strings.Repeat("-", 70) + "x"} {
		got := LabelValue(s)
		if len(got) > 63 || !validRE.MatchString(got) {
			t.Errorf("LabelValue(%q) = %q: not a valid label value", s, got)
		}
	}
	if LabelValue(long+"1") == LabelValue(long+"2") {
		t.Error("long label values collide")
	}
}

// TestCompanyOfAdoptsOldLabel: an agent pod or Job an older pcsync made
// carries the company under pcsync.io/company; it is still the company's,
// and the new key wins where both are.
func TestCompanyOfAdoptsOldLabel(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"this pcsync's", map[string]string{LabelCompany: "acme"}, "acme"},
		{"an older pcsync's", map[string]string{LegacyLabelCompany: "acme"}, "acme"},
		{"both: the new key wins", map[string]string{LabelCompany: "acme", LegacyLabelCompany: "globex"}, "acme"},
		{"none", map[string]string{LabelRole: RoleAgent}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, CompanyOf(tt.labels)); diff != "" {
				t.Errorf("CompanyOf (-want +got):\n%s", diff)
			}
		})
	}
}
