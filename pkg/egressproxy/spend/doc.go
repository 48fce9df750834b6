// Package spend counts what a tenant's model calls cost as their answers
// pass through the egress proxy's credential route, and caps it.
//
// A Meter reads a response's body through unchanged and unbuffered, and
// reads the provider's usage from it as it passes (Anthropic's Messages,
// OpenAI's Chat Completions and Responses, Gemini's generateContent;
// streamed or not). A price Table turns usage into cost, in micro-cents;
// a model it does not name costs its provider's fallback price, logged
// once.
//
// A Gate (the route's inject.SpendGate) checks each request of a run
// against the company's monthly budget, its agent's (budgetMonthlyCents)
// and the cap per run, and refuses it with a 403 in the provider's error
// format that names the budget and how to raise it; a request admitted
// is metered as it streams, and what each event reports is counted
// before its bytes go on to the agent, so a CLI's next request finds it
// counted. Requests already answering finish. The month starts on the
// first in the company's time zone. The run's agent is the proxy pod's
// annotation the daemon sets beside the run's token
// (AnnotationAgentPrefix).
//
// Files: scan.go (the incremental JSON scanner), usage.go (each provider's
// usage fields), meter.go (the body's reader and SSE events), prices.go
// (the price table; prices.yaml is the one shipped), config.go (the
// proxy's --spend configuration), ledger.go (the month's spend and the
// budgets), record.go (the month's spend kept outside the proxy, per
// process, and its encoding), gate.go (the route's gate and its metered
// writer), agents.go (which run is which agent's, and the base
// annotation), report.go (what this process counted, served at /spend,
// and its base), refuse.go (the provider-shaped refusal), metrics.go.
package spend
