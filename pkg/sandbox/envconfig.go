package sandbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/pcsync/pcsync/pkg/config"
)

// EnvironmentConfig is the config of a Paperclip environment whose driver
// is pcsync's sandbox provider (driver "sandbox", provider "pcsync"), as
// Paperclip passes it to every hook.
type EnvironmentConfig struct {
	// Provider is the sandbox provider key; "pcsync".
	Provider string `json:"provider,omitempty"`
	// Company is the pcsync Company (its slug, metadata.name) whose tenant
	// namespace hosts the lease pods. Required.
	Company string `json:"company"`
	// SocketPath is where the plugin reaches the daemon; the daemon only
	// passes it through.
	SocketPath string `json:"socketPath,omitempty"`
	// Image replaces the per-adapter image; it must be allowed by the
	// config (Settings spec.images.allowList or an adapter's image).
	Image string `json:"image,omitempty"`
	// LeaseTTLSec bounds a lease's life when Paperclip asks for no expiry.
	LeaseTTLSec int `json:"leaseTtlSec,omitempty"`
	// TimeoutMs is Paperclip's RPC timeout for the hooks (Paperclip reads
	// it; the daemon bounds a lease's wait for its pod by it).
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// EnvAllow names further environment keys (exact, or PREFIX_*) that
	// may reach the pod (see EnvRule).
	EnvAllow []string `json:"envAllow,omitempty"`
	// NoPrestart (config "prestart": false) says the plugin starts no
	// lease when Paperclip starts a run, before it asks for one (Prestart).
	NoPrestart bool `json:"-"`
	// Core holds the fields Paperclip's core reads of every sandbox
	// environment (reuseLease, streamRunLogs, …): kept as given.
	Core map[string]any `json:"-"`
}

// coreConfigKeys are the sandbox environment fields of Paperclip's core
// (besides provider and timeoutMs); pcsync passes them through.
var coreConfigKeys = []string{"reuseLease", "streamRunLogs", "runnerLifecycleMode", "runnerIdleTimeoutMs", "archiveOnRelease", "bridgeRequestTimeoutMs"}

// DefaultTimeoutMs is the RPC timeout the normalized config carries when the
// environment sets none: Paperclip otherwise gives a hook 30 s, too short for
// a pod whose image is pulled.
const DefaultTimeoutMs = 300_000

// knownConfigKeys are the EnvironmentConfig fields, for unknown-key errors.
var knownConfigKeys = []string{"provider", "company", "socketPath", "image", "leaseTtlSec", "timeoutMs", "envAllow", "prestart"}

// ConfigError is one problem of an environment config, named by its field.
type ConfigError struct {
	Field   string
	Message string
}

// Error formats the problem as Paperclip shows it: "config.<field>: message".
func (e ConfigError) Error() string { return "config." + e.Field + ": " + e.Message }

// ParseConfig decodes an environment config (Paperclip's JSON object),
// reporting every problem by field rather than the first.
func ParseConfig(raw map[string]any) (EnvironmentConfig, []ConfigError) {
	var errs []ConfigError
	var c EnvironmentConfig
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if slices.Contains(coreConfigKeys, k) {
			if c.Core == nil {
				c.Core = map[string]any{}
			}
			c.Core[k] = raw[k]
			continue
		}
		if !slices.Contains(knownConfigKeys, k) {
			errs = append(errs, ConfigError{k, fmt.Sprintf("unknown field; known fields: %s", strings.Join(knownConfigKeys, ", "))})
		}
	}
	str := func(key string, dst *string) {
		v, ok := raw[key]
		if !ok || v == nil {
			return
		}
		s, ok := v.(string)
		if !ok {
			errs = append(errs, ConfigError{key, fmt.Sprintf("want a string, got %s", jsonType(v))})
			return
		}
		*dst = strings.TrimSpace(s)
	}
	num := func(key string, dst *int64) {
		v, ok := raw[key]
		if !ok || v == nil {
			return
		}
		f, ok := v.(float64)
		if !ok || f != float64(int64(f)) || f <= 0 {
			errs = append(errs, ConfigError{key, fmt.Sprintf("want a positive whole number, got %s", compact(v))})
			return
		}
		*dst = int64(f)
	}
	str("provider", &c.Provider)
	str("company", &c.Company)
	str("socketPath", &c.SocketPath)
	str("image", &c.Image)
	var ttl int64
	num("leaseTtlSec", &ttl)
	c.LeaseTTLSec = int(ttl)
	num("timeoutMs", &c.TimeoutMs)
	if v, ok := raw["envAllow"]; ok && v != nil {
		list, ok := v.([]any)
		if !ok {
			errs = append(errs, ConfigError{"envAllow", fmt.Sprintf("want a list of environment variable names, got %s", jsonType(v))})
		}
		for i, e := range list {
			s, ok := e.(string)
			if !ok || !validEnvPattern(s) {
				errs = append(errs, ConfigError{fmt.Sprintf("envAllow[%d]", i),
					fmt.Sprintf("want an environment variable name or PREFIX_*, got %s", compact(e))})
				continue
			}
			c.EnvAllow = append(c.EnvAllow, s)
		}
	}
	if v, ok := raw["prestart"]; ok && v != nil {
		on, ok := v.(bool)
		if !ok {
			errs = append(errs, ConfigError{"prestart", fmt.Sprintf("want true or false, got %s", compact(v))})
		}
		c.NoPrestart = ok && !on
	}
	if c.Provider != "" && c.Provider != ProviderKey {
		errs = append(errs, ConfigError{"provider", fmt.Sprintf("is %q; this plugin serves provider %q", c.Provider, ProviderKey)})
	}
	if c.Company == "" {
		errs = append(errs, ConfigError{"company", "required: the pcsync Company (metadata.name) whose tenant namespace hosts this environment's pods"})
	}
	if c.SocketPath != "" && !path.IsAbs(c.SocketPath) {
		errs = append(errs, ConfigError{"socketPath", fmt.Sprintf("%q is not an absolute path", c.SocketPath)})
	}
	return c, errs
}

// Check validates c against the loaded pcsync config: the company is
// declared and the image, if set, is allowed.
func (c EnvironmentConfig) Check(m *config.Model) []ConfigError {
	var errs []ConfigError
	if c.Company != "" {
		if _, ok := m.Company(c.Company); !ok {
			var known []string
			for i := range m.Companies {
				known = append(known, m.Companies[i].Slug())
			}
			msg := fmt.Sprintf("no Company %q in the pcsync config", c.Company)
			if len(known) > 0 {
				msg += " (declared: " + strings.Join(known, ", ") + ")"
			}
			errs = append(errs, ConfigError{"company", msg + "; companies are declared in Git, never created from here"})
		}
	}
	if c.Image != "" && !m.ImageAllowed(c.Image) {
		errs = append(errs, ConfigError{"image", imageRefusal(c.Image)})
	}
	return errs
}

// Normalized returns c as the config Paperclip should store: defaults
// filled in.
func (c EnvironmentConfig) Normalized() map[string]any {
	out := map[string]any{}
	maps.Copy(out, c.Core)
	out["provider"], out["company"] = ProviderKey, c.Company
	if c.SocketPath != "" {
		out["socketPath"] = c.SocketPath
	}
	if c.Image != "" {
		out["image"] = c.Image
	}
	if c.LeaseTTLSec > 0 {
		out["leaseTtlSec"] = c.LeaseTTLSec
	}
	out["timeoutMs"] = cmp.Or(c.TimeoutMs, DefaultTimeoutMs)
	if len(c.EnvAllow) > 0 {
		out["envAllow"] = c.EnvAllow
	}
	if c.NoPrestart {
		out["prestart"] = false
	}
	return out
}

func imageRefusal(image string) string {
	return fmt.Sprintf("image %q is not allowed: it is no adapter's image in the pcsync config and matches no glob of Settings spec.images.allowList", image)
}

func validEnvPattern(s string) bool {
	s = strings.TrimSuffix(s, "*")
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func jsonType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return "null"
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}
