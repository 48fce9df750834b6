package spend

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// MicroCents are a millionth of a US cent: what spend is counted in.
type MicroCents int64

// Cents is m in cents, rounded up.
func (m MicroCents) Cents() int64 { return (int64(m) + perCent - 1) / perCent }

const perCent = 1_000_000

// FromCents is c cents.
func FromCents(c int64) MicroCents { return MicroCents(c * perCent) }

// Price is a model's price per million tokens, in micro-cents, of each
// kind of token.
type Price struct {
	Input, Output, CacheRead, CacheWrite MicroCents
}

// Rate is a price as written in Git: US dollars per million tokens,
// decimal (at most 8 digits after the point). CacheRead and CacheWrite
// default to Input.
type Rate struct {
	Input      json.Number `json:"input"`
	Output     json.Number `json:"output"`
	CacheRead  json.Number `json:"cacheRead,omitempty"`
	CacheWrite json.Number `json:"cacheWrite,omitempty"`
}

// Table is the price of each provider's models.
type Table struct {
	providers map[adapters.Provider]*providerPrices
}

type providerPrices struct {
	fallback Price
	// patterns are a company's first, then pcsync's, each longest first:
	// the first that matches is the model's.
	patterns []pattern
}

type pattern struct {
	name   string
	prefix bool
	price  Price
	// company marks a company's price (Set), which comes before
	// pcsync's: its "claude*" prices every Claude model.
	company bool
}

//go:embed prices.yaml
var shipped []byte

// Shipped returns the price table pcsync ships (prices.yaml).
func Shipped() Table {
	t, err := ParseTable(shipped)
	if err != nil {
		panic("spend: prices.yaml: " + err.Error())
	}
	return t
}

// ParseTable reads a table in prices.yaml's format.
func ParseTable(raw []byte) (Table, error) {
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return Table{}, err
	}
	var doc map[adapters.Provider]struct {
		Fallback *Rate           `json:"fallback"`
		Models   map[string]Rate `json:"models"`
	}
	d := json.NewDecoder(bytes.NewReader(j))
	d.UseNumber()
	d.DisallowUnknownFields()
	if err := d.Decode(&doc); err != nil {
		return Table{}, err
	}
	t := Table{providers: map[adapters.Provider]*providerPrices{}}
	for p, pp := range doc {
		if pp.Fallback == nil {
			return Table{}, fmt.Errorf("%s: no fallback price", p)
		}
		fb, err := pp.Fallback.price()
		if err != nil {
			return Table{}, fmt.Errorf("%s fallback: %w", p, err)
		}
		t.providers[p] = &providerPrices{fallback: fb}
		for _, m := range slices.Sorted(maps.Keys(pp.Models)) {
			if err := t.set(p, m, pp.Models[m], false); err != nil {
				return Table{}, err
			}
		}
	}
	return t, nil
}

// Set sets a company's price of a model pattern of p (an exact name, a
// prefix ending in "*", or "*": the fallback) on a copy of the table. A
// company's patterns are tried before pcsync's.
func (t *Table) Set(p adapters.Provider, model string, r Rate) error {
	return t.set(p, model, r, true)
}

func (t *Table) set(p adapters.Provider, model string, r Rate, company bool) error {
	price, err := r.price()
	if err != nil {
		return fmt.Errorf("%s %s: %w", p, model, err)
	}
	old := t.providers[p]
	pp := &providerPrices{}
	if old != nil {
		pp.fallback, pp.patterns = old.fallback, slices.Clone(old.patterns)
	}
	if t.providers == nil {
		t.providers = map[adapters.Provider]*providerPrices{}
	} else {
		t.providers = maps.Clone(t.providers)
	}
	t.providers[p] = pp
	if model == "*" || old == nil {
		pp.fallback = price
		if model == "*" {
			return nil
		}
	}
	pat := pattern{name: strings.TrimSuffix(model, "*"), prefix: strings.HasSuffix(model, "*"), price: price, company: company}
	pp.patterns = slices.DeleteFunc(pp.patterns, func(q pattern) bool { return q.name == pat.name && q.prefix == pat.prefix })
	pp.patterns = append(pp.patterns, pat)
	slices.SortStableFunc(pp.patterns, func(a, b pattern) int {
		if a.company != b.company {
			if a.company {
				return -1
			}
			return 1
		}
		if len(a.name) != len(b.name) {
			return len(b.name) - len(a.name)
		}
		return strings.Compare(a.name, b.name)
	})
	return nil
}

// Price returns model's price, and false when no pattern names it (the
// provider's fallback price, or, for a provider the table lacks, the
// dearest fallback of all).
func (t Table) Price(p adapters.Provider, model string) (Price, bool) {
	pp := t.providers[p]
	if pp == nil {
		var dear Price
		for _, o := range t.providers {
			dear = dearer(dear, o.fallback)
		}
		return dear, false
	}
	for _, q := range pp.patterns {
		if model == q.name || q.prefix && strings.HasPrefix(model, q.name) {
			return q.price, true
		}
	}
	return pp.fallback, false
}

func dearer(a, b Price) Price {
	return Price{max(a.Input, b.Input), max(a.Output, b.Output), max(a.CacheRead, b.CacheRead), max(a.CacheWrite, b.CacheWrite)}
}

// Cost is what u costs at price, rounded up to a micro-cent.
func (p Price) Cost(u Usage) MicroCents {
	sum := u.Input*int64(p.Input) + u.Output*int64(p.Output) + u.CacheRead*int64(p.CacheRead) + u.CacheWrite*int64(p.CacheWrite)
	return MicroCents((sum + 999_999) / 1_000_000)
}

func (r Rate) price() (Price, error) {
	in, err := parseDollars(r.Input, "input")
	if err != nil {
		return Price{}, err
	}
	out, err := parseDollars(r.Output, "output")
	if err != nil {
		return Price{}, err
	}
	p := Price{Input: in, Output: out, CacheRead: in, CacheWrite: in}
	if r.CacheRead != "" {
		if p.CacheRead, err = parseDollars(r.CacheRead, "cacheRead"); err != nil {
			return Price{}, err
		}
	}
	if r.CacheWrite != "" {
		if p.CacheWrite, err = parseDollars(r.CacheWrite, "cacheWrite"); err != nil {
			return Price{}, err
		}
	}
	return p, nil
}

// parseDollars reads a decimal number of US dollars exactly, as
// micro-cents (10^8 a dollar).
func parseDollars(n json.Number, field string) (MicroCents, error) {
	r, ok := new(big.Rat).SetString(string(n))
	if ok {
		r.Mul(r, big.NewRat(100_000_000, 1))
	}
	if !ok || !r.IsInt() || r.Sign() < 0 || r.Num().Cmp(big.NewInt(maxPrice)) > 0 {
		return 0, fmt.Errorf("%s: want dollars per million tokens, from 0 to 10000 with at most 8 decimals, not %q", field, string(n))
	}
	return MicroCents(r.Num().Int64()), nil
}

// maxPrice is $10,000 per million tokens: a cost of up to 900 million
// tokens of a response fits an int64 of micro-cents.
const maxPrice = 10_000 * 100_000_000
