// Package fleet measures what a fleet costs pcsync (make bench): 10, 100
// and 1,000 companies of 3 agents each (hack/fleet writes them), applied
// and kept by one `pcsync daemon` on the test control plane with kwok
// nodes. For each size it reports the daemon's cold apply of the whole
// fleet, its steady-state memory and CPU, its API requests per minute while
// nothing changes, and one company's commit → applied; the cost per
// company is each figure over the size, against the same at 10.
package fleet
