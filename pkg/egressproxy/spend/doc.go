// Package spend counts what a tenant's model calls cost as their answers
// pass through the egress proxy's credential route, and caps it.
//
// A Meter reads a response's body through unchanged and unbuffered, and
// reads the provider's usage from it as it passes (Anthropic's Messages,
// OpenAI's Chat Completions and Responses, Gemini's generateContent;
// streamed or not). A price Table turns usage into cost, in micro-cents.
//
// Files: scan.go (the incremental JSON scanner), usage.go (each provider's
// usage fields), meter.go (the body's reader and SSE events), prices.go
// (the price table; prices.yaml is the one shipped).
package spend
