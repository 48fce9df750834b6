package paperclip

import "strings"

// Field paths: a top-level field ("title"), a key of adapterConfig or
// metadata ("adapterConfig.agent", "metadata.<key>", the key taken whole),
// or a path into runtimeConfig ("runtimeConfig.heartbeat.intervalSec").

// liveValue is the live value at path; reportsTo is the manager's id here.
// A null or missing value is nil.
func liveValue(a *Agent, path string) any {
	top, rest, _ := strings.Cut(path, ".")
	switch top {
	case "name":
		return a.Name
	case "role":
		return a.Role
	case "adapterType":
		return a.AdapterType
	case "title":
		return deref(a.Title)
	case "capabilities":
		return deref(a.Capabilities)
	case "reportsTo":
		return deref(a.ReportsTo)
	case "defaultEnvironmentId":
		return deref(a.DefaultEnvironmentID)
	case "budgetMonthlyCents":
		return float64(a.BudgetMonthlyCents)
	case "adapterConfig":
		return a.AdapterConfig[rest]
	case "metadata":
		return a.Metadata[rest]
	case "runtimeConfig":
		var cur any = a.RuntimeConfig
		for _, k := range strings.Split(rest, ".") {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil
			}
			cur = m[k]
		}
		return cur
	}
	return nil
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// resetValue is what a field no longer declared is set to: nothing (a key
// removed, a null) or Paperclip's default.
func resetValue(path string) any {
	if path == "budgetMonthlyCents" {
		return float64(0)
	}
	return nil
}

// body builds the JSON body of a create or a PATCH that sets each path of
// set to its value (nil removes a key or writes null). runtimeConfig and
// metadata are replaced whole by Paperclip, so they start from the live
// values (base, nil for a create); adapterConfig is merged by Paperclip, so
// only its keys are sent.
func body(base *Agent, set map[string]any) map[string]any {
	out := map[string]any{}
	var runtime, metadata map[string]any
	for path, v := range set {
		top, rest, _ := strings.Cut(path, ".")
		switch top {
		case "adapterConfig":
			ac, _ := out["adapterConfig"].(map[string]any)
			if ac == nil {
				ac = map[string]any{}
				out["adapterConfig"] = ac
			}
			ac[rest] = v
		case "metadata":
			if metadata == nil {
				metadata = cloneMap(baseMap(base, "metadata"))
			}
			if v == nil {
				delete(metadata, rest)
			} else {
				metadata[rest] = v
			}
		case "runtimeConfig":
			if runtime == nil {
				runtime = cloneMap(baseMap(base, "runtimeConfig"))
			}
			setPath(runtime, strings.Split(rest, "."), v)
		default:
			out[path] = v
		}
	}
	if metadata != nil {
		out["metadata"] = metadata
	}
	if runtime != nil {
		out["runtimeConfig"] = runtime
	}
	return out
}

func baseMap(a *Agent, top string) map[string]any {
	if a == nil {
		return nil
	}
	if top == "metadata" {
		return a.Metadata
	}
	return a.RuntimeConfig
}

// cloneMap copies m deeply enough for setPath: nested maps are copied.
func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			v = cloneMap(sub)
		}
		out[k] = v
	}
	return out
}

// setPath sets (or, with nil, deletes) the value at keys in m.
func setPath(m map[string]any, keys []string, v any) {
	for _, k := range keys[:len(keys)-1] {
		sub, ok := m[k].(map[string]any)
		if !ok {
			if v == nil {
				return
			}
			sub = map[string]any{}
			m[k] = sub
		}
		m = sub
	}
	last := keys[len(keys)-1]
	if v == nil {
		delete(m, last)
		return
	}
	m[last] = v
}
