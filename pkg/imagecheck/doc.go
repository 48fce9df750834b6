// Package imagecheck is the image preflight: before a run or a lease meets
// ErrImagePull on a node, it asks each image's registry whether the image
// exists, with the credentials of the pull secrets the pods would use, and
// says what fixes a missing one.
//
// It answers one HEAD request per image (the manifest, by tag) and never
// pulls. A registry on a loopback or private address is spoken to over
// plain HTTP, as containerd's default configuration does for localhost.
// Credentials come from .dockerconfigjson data (Keychain); no credential
// ever appears in a result or an error.
//
// Files:
//
//	check.go     Check, its Options and Result: one HEAD per image, classified
//	keychain.go  Keychain: credentials per registry from .dockerconfigjson
//	wanted.go    Wanted, Preflight, Resolve and Advice: the images a config's pods
//	             would run, each looked up, with what fixes a missing one
package imagecheck
