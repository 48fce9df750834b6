package images

import "strings"

// Split takes a reference apart: registry[:port][/org], the name (the last
// path element) and the tag. A digest ("@sha256:…") is dropped, and a
// reference without a tag or without a registry gives "" for it:
//
//	Split("reg.example.com:5000/org/pcsync:v1.2") = "reg.example.com:5000/org", "pcsync", "v1.2"
func Split(ref string) (registry, name, tag string) {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndexByte(ref, '/'); i >= 0 {
		registry, ref = ref[:i], ref[i+1:]
	}
	name, tag, _ = strings.Cut(ref, ":")
	return registry, name, tag
}
