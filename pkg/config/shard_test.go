package config_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pcsync/pcsync/pkg/config"
)

// fleet is a model of companies named by slug → shard ("" names none).
func fleet(shards map[string]string) *config.Model {
	m := &config.Model{Settings: config.Settings{Spec: config.SettingsSpec{NamespacePrefix: "p-"}}}
	for _, slug := range []string{"a1", "a2", "b1", "none"} {
		s, ok := shards[slug]
		if !ok {
			continue
		}
		c := config.Company{Metadata: config.Metadata{Name: slug}}
		if s != "" {
			c.Metadata.Labels = map[string]string{config.LabelShard: s, "team": "x"}
		}
		m.Companies = append(m.Companies, c)
	}
	return m
}

func TestShard(t *testing.T) {
	m := fleet(map[string]string{"a1": "a", "a2": "a", "b1": "b", "none": ""})
	slugs := func(m *config.Model) []string {
		var out []string
		for i := range m.Companies {
			out = append(out, m.Companies[i].Slug())
		}
		return out
	}
	tests := []struct {
		shard     config.Shard
		serves    []string
		elsewhere []string
		others    []config.Shard
		name      string
	}{
		{"a", []string{"a1", "a2"}, []string{"p-b1", "p-none"}, []config.Shard{"", "b"}, "pcsync-a"},
		{"b", []string{"b1"}, []string{"p-a1", "p-a2", "p-none"}, []config.Shard{"", "a"}, "pcsync-b"},
		{"", []string{"none"}, []string{"p-a1", "p-a2", "p-b1"}, []config.Shard{"a", "b"}, "pcsync"},
		{"c", nil, []string{"p-a1", "p-a2", "p-b1", "p-none"}, []config.Shard{"", "a", "b"}, "pcsync-c"},
	}
	for _, tt := range tests {
		t.Run(tt.shard.String(), func(t *testing.T) {
			got := struct {
				Serves, Elsewhere []string
				Others            []config.Shard
				Name              string
			}{slugs(tt.shard.Model(m)), tt.shard.Elsewhere(m), tt.shard.Others(m), tt.shard.Name("pcsync")}
			want := struct {
				Serves, Elsewhere []string
				Others            []config.Shard
				Name              string
			}{tt.serves, tt.elsewhere, tt.others, tt.name}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got := slugs(m); len(got) != 4 {
		t.Errorf("Model changed the model given: %v", got)
	}
	one := fleet(map[string]string{"a1": "a"})
	if config.Shard("a").Model(one) != one {
		t.Error("Model of a shard that serves every company is not the model itself")
	}
}

func TestShardRefusal(t *testing.T) {
	c := &fleet(map[string]string{"b1": "b"}).Companies[0]
	want := `company "b1" is in shard "b" (metadata.labels pcsync.io/shard) and this daemon serves no shard: ` +
		`write its run requests to the spool of the daemon of shard "b"`
	if diff := cmp.Diff(want, config.Shard("").Refusal(c)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
