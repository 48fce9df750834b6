package spend

import (
	"strconv"
	"strings"

	"github.com/pcsync/pcsync/pkg/adapters"
)

// Usage is what one response used, as its provider reported it.
type Usage struct {
	Provider adapters.Provider
	// Model is the model the response names ("" when it names none).
	Model string
	// Input are the input tokens not read from a cache.
	Input int64
	// CacheRead are the input tokens read from the provider's cache.
	CacheRead int64
	// CacheWrite are the input tokens written to it (Anthropic's cache
	// creation).
	CacheWrite int64
	// Output are the output tokens, reasoning ("thoughts") included.
	Output int64
}

// Tokens is the usage's tokens of every kind.
func (u Usage) Tokens() int64 { return u.Input + u.CacheRead + u.CacheWrite + u.Output }

// slot is one value a provider's response reports.
type slot int

const (
	slotModel slot = iota
	// slotInput: input tokens without the cache's; slotInputAll: input
	// tokens of which slotCacheRead are a part.
	slotInput
	slotInputAll
	slotCacheRead
	slotCacheWrite
	slotOutput
	// slotOutputExtra are output tokens reported beside slotOutput
	// (Gemini's thoughts), slotInputExtra input ones (Gemini's tool-use
	// prompt).
	slotOutputExtra
	slotInputExtra
	numSlots
)

type pathKey struct{ parent, key string }

// fieldSet is where a provider's responses report usage: the slot of each
// (object path, key), and the object paths that lead to one.
type fieldSet struct {
	slots map[pathKey]slot
	// children maps an object path and key to the child's path, for the
	// objects under which a wanted field lies.
	children map[pathKey]string
	// names are the keys of the wanted paths, each kept once: a key read
	// is one of them, or otherKey.
	names map[string]string
}

// otherKey stands for every key no wanted path has: keys are not kept.
const otherKey = "\x01"

func newFieldSet(fields map[string]slot) *fieldSet {
	f := &fieldSet{slots: map[pathKey]slot{}, children: map[pathKey]string{}, names: map[string]string{}}
	for path, sl := range fields {
		parts := strings.Split(path, ".")
		for _, p := range parts {
			f.names[p] = p
		}
		parent := ""
		for _, p := range parts[:len(parts)-1] {
			child := p
			if parent != "" {
				child = parent + "." + p
			}
			f.children[pathKey{parent, p}] = child
			parent = child
		}
		f.slots[pathKey{parent, parts[len(parts)-1]}] = sl
	}
	return f
}

// name is key as kept: its wanted name, or otherKey.
func (f *fieldSet) name(key []byte) string {
	if n, ok := f.names[string(key)]; ok {
		return n
	}
	return otherKey
}

// child is the path of the object at key under path, or skipPath.
func (f *fieldSet) child(path, key string) string {
	if c, ok := f.children[pathKey{path, key}]; ok {
		return c
	}
	return skipPath
}

// providerFields are the usage fields of each provider's responses and
// stream events, JSON and SSE alike.
var providerFields = map[adapters.Provider]*fieldSet{
	// Messages: the body's model and usage; a stream's message_start
	// (message.model, message.usage) and message_delta (usage, counts so
	// far).
	adapters.ProviderAnthropic: newFieldSet(map[string]slot{
		"model": slotModel, "message.model": slotModel,
		"usage.input_tokens": slotInput, "message.usage.input_tokens": slotInput,
		"usage.cache_read_input_tokens": slotCacheRead, "message.usage.cache_read_input_tokens": slotCacheRead,
		"usage.cache_creation_input_tokens": slotCacheWrite, "message.usage.cache_creation_input_tokens": slotCacheWrite,
		"usage.output_tokens": slotOutput, "message.usage.output_tokens": slotOutput,
	}),
	// Chat Completions (the body, or a stream's usage chunk) and the
	// Responses API (the body, or response.completed's response).
	adapters.ProviderOpenAI: newFieldSet(map[string]slot{
		"model": slotModel, "response.model": slotModel,
		"usage.prompt_tokens": slotInputAll, "usage.prompt_tokens_details.cached_tokens": slotCacheRead,
		"usage.completion_tokens": slotOutput,
		"usage.input_tokens":      slotInputAll, "usage.input_tokens_details.cached_tokens": slotCacheRead,
		"usage.output_tokens":                               slotOutput,
		"response.usage.input_tokens":                       slotInputAll,
		"response.usage.output_tokens":                      slotOutput,
		"response.usage.input_tokens_details.cached_tokens": slotCacheRead,
	}),
	// generateContent's body, each chunk of streamGenerateContent (SSE,
	// or a JSON array): usageMetadata, counts so far.
	adapters.ProviderGemini: newFieldSet(map[string]slot{
		"modelVersion":                          slotModel,
		"usageMetadata.promptTokenCount":        slotInputAll,
		"usageMetadata.cachedContentTokenCount": slotCacheRead,
		"usageMetadata.toolUsePromptTokenCount": slotInputExtra,
		"usageMetadata.candidatesTokenCount":    slotOutput,
		"usageMetadata.thoughtsTokenCount":      slotOutputExtra,
	}),
}

// tally is a response's usage so far: each count is the largest reported
// (the providers' stream events report counts so far, not increments).
type tally struct {
	model  string
	counts [numSlots]int64
}

// add takes one document's (one event's) values, and tells whether a
// count grew.
func (t *tally) add(s *scanner) bool {
	if s.seen[slotModel] && t.model == "" {
		t.model = s.found[slotModel]
	}
	grew := false
	for sl := slotInput; sl < numSlots; sl++ {
		if !s.seen[sl] {
			continue
		}
		if n, err := strconv.ParseInt(s.found[sl], 10, 64); err == nil && n > t.counts[sl] {
			t.counts[sl], grew = n, true
		}
	}
	return grew
}

// usage is the tally as a Usage.
func (t *tally) usage(p adapters.Provider) Usage {
	c := t.counts
	in := c[slotInput] + c[slotInputExtra]
	if c[slotInputAll] > 0 {
		in += max(c[slotInputAll]-c[slotCacheRead], 0)
	}
	return Usage{Provider: p, Model: t.model, Input: in, CacheRead: c[slotCacheRead],
		CacheWrite: c[slotCacheWrite], Output: c[slotOutput] + c[slotOutputExtra]}
}
