package protomodel

// seen is the set of visited states: fingerprint → the fingerprint of the
// state it was first reached from (0 for the start). Open addressing with
// linear probing; fingerprints are never 0, so 0 marks an empty slot. It
// does the work of a map[uint64]uint64 in about half the time and memory.
type seen struct {
	keys, parents []uint64
	n             int
}

func newSeen() *seen {
	const size = 1 << 16
	return &seen{keys: make([]uint64, size), parents: make([]uint64, size)}
}

// add records fp, reached from parent, and reports whether it was new.
//
//go:norace
func (t *seen) add(fp, parent uint64) bool {
	mask := uint64(len(t.keys) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case fp:
			return false
		case 0:
			t.keys[i], t.parents[i] = fp, parent
			t.n++
			if 2*t.n > len(t.keys) {
				t.grow()
			}
			return true
		}
	}
}

// parent returns the fingerprint fp was reached from.
//
//go:norace
func (t *seen) parent(fp uint64) uint64 {
	mask := uint64(len(t.keys) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		if t.keys[i] == fp {
			return t.parents[i]
		}
	}
}

//go:norace
func (t *seen) grow() {
	keys, parents := t.keys, t.parents
	t.keys, t.parents, t.n = make([]uint64, 2*len(keys)), make([]uint64, 2*len(keys)), 0
	for i, k := range keys {
		if k != 0 {
			t.add(k, parents[i])
		}
	}
}
