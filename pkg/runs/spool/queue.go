package spool

import (
	"cmp"
	"maps"
	"slices"

	"github.com/pcsync/pcsync/pkg/runs"
)

// queue holds accepted runs per agent in FIFO order (request modification
// time, then name) and counts the runs of each agent that are running. It
// belongs to the daemon loop and is not safe for concurrent use.
type queue struct {
	agents map[runs.AgentKey]*agentQueue
}

type agentQueue struct {
	waiting []*runs.Run
	running int
	limit   int
}

func newQueue() *queue { return &queue{agents: map[runs.AgentKey]*agentQueue{}} }

func (q *queue) agent(r *runs.Run) *agentQueue {
	k := r.AgentKey()
	a := q.agents[k]
	if a == nil {
		a = &agentQueue{}
		q.agents[k] = a
	}
	// The limit follows the config the run was accepted against.
	a.limit = max(1, r.Agent.Concurrency)
	return a
}

// runOrder is the FIFO order of an agent's runs.
func runOrder(a, b *runs.Run) int {
	return cmp.Or(a.ModTime.Compare(b.ModTime), cmp.Compare(a.Name(), b.Name()))
}

// push queues r.
func (q *queue) push(r *runs.Run) {
	a := q.agent(r)
	i, _ := slices.BinarySearchFunc(a.waiting, r, runOrder)
	a.waiting = slices.Insert(a.waiting, i, r)
}

// remove takes the queued run of that name out of the queue; it reports
// whether it was queued.
func (q *queue) remove(r *runs.Run) bool {
	a := q.agents[r.AgentKey()]
	if a == nil {
		return false
	}
	i := slices.Index(a.waiting, r)
	if i < 0 {
		return false
	}
	a.waiting = slices.Delete(a.waiting, i, i+1)
	return true
}

// occupy counts a run that is already running (adopted) against its
// agent's concurrency.
func (q *queue) occupy(r *runs.Run) { q.agent(r).running++ }

// release frees the slot of a finished run.
func (q *queue) release(r *runs.Run) {
	if a := q.agents[r.AgentKey()]; a != nil && a.running > 0 {
		a.running--
	}
}

// ready takes every run that may start now off the queue and counts it as
// running, oldest first within each agent.
func (q *queue) ready() []*runs.Run {
	var out []*runs.Run
	for _, k := range slices.SortedFunc(maps.Keys(q.agents), func(a, b runs.AgentKey) int {
		return cmp.Or(cmp.Compare(a.Company, b.Company), cmp.Compare(a.Agent, b.Agent))
	}) {
		a := q.agents[k]
		for a.running < a.limit && len(a.waiting) > 0 {
			out = append(out, a.waiting[0])
			a.waiting = a.waiting[1:]
			a.running++
		}
	}
	return out
}

// counts returns the number of queued and running runs over all agents.
func (q *queue) counts() (queued, running int) {
	for _, a := range q.agents {
		queued += len(a.waiting)
		running += a.running
	}
	return queued, running
}
