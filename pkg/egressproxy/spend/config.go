package spend

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Config is a company's budgets and prices, as pcsync render gives them
// to `pcsync egress-proxy --spend`.
type Config struct {
	Company string `json:"company"`
	// MonthlyCents caps the company's spend in a month; 0: no cap.
	MonthlyCents int64 `json:"monthlyCents,omitempty"`
	// RunCents caps each run's (each lease's) spend; 0: no cap.
	RunCents int64 `json:"runCents,omitempty"`
	// Agents caps each agent's spend in a month (its budgetMonthlyCents);
	// an agent not named has no cap of its own.
	Agents map[string]int64 `json:"agents,omitempty"`
	// TimeZone is where the month starts (an IANA name); "" is UTC.
	TimeZone string `json:"timeZone,omitempty"`
	// Prices override the shipped table's.
	Prices []PriceOverride `json:"prices,omitempty"`
	// AnnotationsFile is the proxy pod's annotations (a downwardAPI
	// file), where the daemon names each live run's agent.
	AnnotationsFile string `json:"annotationsFile"`
	// WaitBase holds each request until the daemon has given this process
	// its base (AnnotationBase): the month's spend kept outside the proxy.
	WaitBase bool `json:"waitBase,omitempty"`
}

// PriceOverride is a company's price of a model pattern of a provider
// (spec.budget.prices; "*" is the provider's fallback).
type PriceOverride struct {
	Provider adapters.Provider `json:"provider"`
	Model    string            `json:"model"`
	Rate
}

// ParseConfig reads a Config and checks its time zone and prices.
func ParseConfig(raw []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(raw, &c); err != nil {
		return Config{}, fmt.Errorf("spend: %w", err)
	}
	if c.Company == "" || c.AnnotationsFile == "" {
		return Config{}, fmt.Errorf("spend: company and annotationsFile are required")
	}
	if _, err := c.Location(); err != nil {
		return Config{}, err
	}
	if _, err := c.Table(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Location is the time zone of the company's months.
func (c Config) Location() (*time.Location, error) {
	loc, err := time.LoadLocation(c.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("spend %s: time zone %q: %w", c.Company, c.TimeZone, err)
	}
	return loc, nil
}

// Table is the shipped price table with the company's prices.
func (c Config) Table() (Table, error) {
	t := Shipped()
	for _, p := range c.Prices {
		if err := t.Set(p.Provider, p.Model, p.Rate); err != nil {
			return Table{}, fmt.Errorf("spend %s: price: %w", c.Company, err)
		}
	}
	return t, nil
}
