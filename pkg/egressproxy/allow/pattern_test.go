package allow

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMatch holds Cilium's matchPattern semantics: "*" within one label,
// "**." over one or more leading labels, never the parent name itself.
func TestMatch(t *testing.T) {
	tests := []struct {
		pattern string
		host    string
		want    bool
	}{
		{"api.example.com", "api.example.com", true},
		{"api.example.com", "API.Example.COM.", true},
		{"api.example.com", "example.com", false},
		{"api.example.com", "x.api.example.com", false},
		{"api.example.com", "api.example.com.evil.test", false},
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.example.com", "aexample.com", false},
		{"*.example.com", "a.example.com.evil.test", false},
		{"api-*.example.com", "api-eu.example.com", true},
		{"api-*.example.com", "api-.example.com", true},
		{"api-*.example.com", "api-eu.x.example.com", false},
		{"api-*.example.com", "web.example.com", false},
		{"**.example.com", "a.example.com", true},
		{"**.example.com", "a.b.c.example.com", true},
		{"**.example.com", "example.com", false},
		{"**.example.com", "a.example.org", false},
		{"*.s3.amazonaws.com", "bucket.s3.amazonaws.com", true},
		{"*.s3.amazonaws.com", "s3.amazonaws.com", false},
		{"api.example.com", "", false},
	}
	for _, tt := range tests {
		m, err := Compile([]string{tt.pattern})
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.pattern, err)
		}
		if got := m.Match(tt.host); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.pattern, tt.host, got, tt.want)
		}
	}
}

func TestCheckPattern(t *testing.T) {
	tests := []struct {
		pattern string
		want    string // a part of the error; "" for none
	}{
		{"*.example.com", ""},
		{"**.example.com", ""},
		{"api-*.example.com", ""},
		{"*", "matches every host"},
		{"**", "matches every host"},
		{"*.*", "matches every host"},
		{"a.**.example.com", "only as the first label"},
		{"*.s3.amazonaws.com", ""},
		{"*.corp.internal", ""},
		{"*.com", "public suffix \"com\""},
		{"*example.com", "public suffix \"com\""},
		{"**.co.uk", "public suffix \"co.uk\""},
		{"api-*.internal", "public suffix \"internal\""},
		{"api.*.com", "only in the first label"},
		{"a.*.example.com", "only in the first label"},
		{"*.*.example.com", "only in the first label"},
		{"*.exa mple.com", "only letters"},
		{"*..example.com", "empty label"},
		{"", "empty"},
	}
	for _, tt := range tests {
		err := CheckPattern(tt.pattern)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("CheckPattern(%q) = %v, want nil", tt.pattern, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("CheckPattern(%q) = %v, want an error with %q", tt.pattern, err, tt.want)
		}
	}
}

func TestListRoundTrip(t *testing.T) {
	in := List{Company: "acme", Hosts: []string{"b.example.com", "*.a.example.com", "b.example.com"}}
	b, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(%s): %v", b, err)
	}
	want := List{Company: "acme", Hosts: []string{"*.a.example.com", "b.example.com"}, Ports: []int{443}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}
	for _, bad := range []string{"company: acme\nhosts: ['*']\n", "hosts: [a.example.com]\n", "company: a\nextra: 1\n", "company: a\nports: [0]\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) = nil error, want one", bad)
		}
	}
}
