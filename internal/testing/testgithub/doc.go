// Package testgithub stands in for GitHub's REST and GraphQL APIs in
// tests that run the real GitHub CLI through a GitHub credential's route:
// API answers only the real token in Bearer, as the proxy sends it, and
// records each request.
//
// Files:
//
//	api.go  API
package testgithub
