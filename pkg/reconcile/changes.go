package reconcile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objectID names a rendered object: its group, kind, namespace and name.
type objectID struct{ group, kind, namespace, name string }

func idOf(u *unstructured.Unstructured) objectID {
	gvk := u.GroupVersionKind()
	return objectID{group: gvk.Group, kind: gvk.Kind, namespace: u.GetNamespace(), name: u.GetName()}
}

// digests are the rendered objects' digests, by object.
type digests map[objectID][sha256.Size]byte

// objectDigests are rendered objects' IDs and digests by the object
// itself: a render cache (render.Cache) hands back the same objects, never
// changed, for a company whose inputs did not change.
type objectDigests map[*unstructured.Unstructured]digested

// digested is an object's ID and digest.
type digested struct {
	id  objectID
	sum [sha256.Size]byte
}

// digestRender digests each rendered object (taking the digest of an
// object of last from it) and the render as a whole; dup is set when two
// objects have the same ID (the apply refuses such a render). byObject is
// the last of the next render.
func digestRender(objs []*unstructured.Unstructured, last objectDigests) (per digests, whole string, dup bool, byObject objectDigests) {
	per = make(digests, len(objs))
	byObject = make(objectDigests, len(objs))
	h := sha256.New()
	var e encoder
	for _, o := range objs {
		d, ok := last[o]
		if !ok {
			e.buf = e.buf[:0]
			e.value(o.Object, 0)
			d = digested{id: idOf(o), sum: sha256.Sum256(e.buf)}
		}
		byObject[o] = d
		id, sum := d.id, d.sum
		if _, ok := per[id]; ok {
			dup = true
		}
		per[id] = sum
		h.Write(sum[:])
	}
	return per, hex.EncodeToString(h.Sum(nil)), dup, byObject
}

// changes returns the objects of objs (digested in now; their IDs in
// byObject, when there) that are new or whose digest differs from applied,
// and whether applied holds an object objs no longer do.
func changes(applied, now digests, byObject objectDigests, objs []*unstructured.Unstructured) (changed []*unstructured.Unstructured, removed bool) {
	for id := range applied {
		if _, ok := now[id]; !ok {
			return nil, true
		}
	}
	for _, o := range objs {
		known, ok := byObject[o]
		id := known.id
		if !ok {
			id = idOf(o)
		}
		if d, ok := applied[id]; !ok || d != now[id] {
			changed = append(changed, o)
		}
	}
	return changed, false
}

// encoder encodes values for their digest, an encoding that tells apart
// any two values whose JSON differs: each value is tagged with its type,
// strings, maps and lists are prefixed with their length, map keys are
// sorted. Types other than those JSON decodes to are encoded as JSON.
type encoder struct {
	buf []byte
	// keys are the sort buffers of the maps being encoded, by depth.
	keys [][]string
}

func (e *encoder) value(v any, depth int) {
	switch x := v.(type) {
	case nil:
		e.buf = append(e.buf, 'n')
	case bool:
		e.buf = append(e.buf, "ft"[b2i(x)])
	case string:
		e.string('s', x)
	case int64:
		e.buf = append(strconv.AppendInt(append(e.buf, 'i'), x, 10), ';')
	case int:
		e.buf = append(strconv.AppendInt(append(e.buf, 'i'), int64(x), 10), ';')
	case float64:
		e.buf = append(strconv.AppendFloat(append(e.buf, 'd'), x, 'g', -1, 64), ';')
	case map[string]any:
		e.buf = append(strconv.AppendInt(append(e.buf, 'm'), int64(len(x)), 10), ':')
		// Lists nest without a sort buffer of their own: a map may be
		// more than one level below the last one.
		for len(e.keys) <= depth {
			e.keys = append(e.keys, nil)
		}
		keys := e.keys[depth][:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		e.keys[depth] = keys
		for _, k := range keys {
			e.string('k', k)
			e.value(x[k], depth+1)
		}
	case []any:
		e.buf = append(strconv.AppendInt(append(e.buf, 'l'), int64(len(x)), 10), ':')
		for _, v := range x {
			e.value(v, depth+1)
		}
	default:
		j, err := json.Marshal(v)
		if err != nil {
			e.string('e', err.Error())
			return
		}
		e.string('j', string(j))
	}
}

func (e *encoder) string(tag byte, s string) {
	e.buf = append(append(strconv.AppendInt(append(e.buf, tag), int64(len(s)), 10), ':'), s...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
