package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

var errNoNodeCount = errors.New("node indexes need a run line with the node count (nodes)")

// granted reads the nodes whose grants counted for a successful acquire
// (or that extended a hold): a list of distinct node indexes, not empty.
// Whether they are below the node count is checked once every line is read
// (checkGranted), since the run line may come anywhere.
func (l *parsed) granted(f fields) error {
	if !f.has("granted") {
		return nil
	}
	if l.op.Outcome != OK {
		return f.err("granted", "given for a %s that did not succeed", l.kind)
	}
	var nodes []int
	if err := json.Unmarshal(f.m["granted"], &nodes); err != nil {
		return f.err("granted", "want a list of node indexes, got %s", f.m["granted"])
	}
	if len(nodes) == 0 {
		return f.err("granted", "empty: omit it when the nodes are not known")
	}
	for i, n := range nodes {
		if n < 0 {
			return f.err("granted", "%d is not a node index", n)
		}
		if slices.Contains(nodes[:i], n) {
			return f.err("granted", "node %d is listed twice", n)
		}
	}
	l.op.Granted = nodes
	return nil
}

// reacquired reads the nodes where an extend re-created its hold's key: a
// list of node indexes, not empty, on an extend that returned (whatever
// its outcome: a re-create lands where it lands). A node may be listed
// more than once: it lost the key again, or an earlier extend's late
// re-create is recorded with this one. The indexes are checked against the
// node count with granted's (checkGranted).
func (l *parsed) reacquired(f fields) error {
	if !f.has("reacquired") {
		return nil
	}
	if l.op.Outcome == Pending {
		return f.err("reacquired", "given for an extend that never returned")
	}
	var nodes []int
	if err := json.Unmarshal(f.m["reacquired"], &nodes); err != nil {
		return f.err("reacquired", "want a list of node indexes, got %s", f.m["reacquired"])
	}
	if len(nodes) == 0 {
		return f.err("reacquired", "empty: omit it when no key was re-created")
	}
	for _, n := range nodes {
		if n < 0 {
			return f.err("reacquired", "%d is not a node index", n)
		}
	}
	l.op.Reacquired = nodes
	return nil
}

// checkGranted checks every granted and reacquired list against the node
// count of the run line: without one, the indexes cannot be checked, so
// they are refused.
func (p *parser) checkGranted(nodes int) error {
	for _, l := range p.ops {
		for _, fl := range []struct {
			field string
			list  []int
		}{{"granted", l.op.Granted}, {"reacquired", l.op.Reacquired}} {
			field := fl.field
			for _, n := range fl.list {
				if nodes == 0 {
					return &LineError{Line: l.n, Field: field, Err: errNoNodeCount}
				}
				if n >= nodes {
					return &LineError{Line: l.n, Field: field,
						Err: fmt.Errorf("node %d is not below the run line's node count %d", n, nodes)}
				}
			}
		}
	}
	return nil
}
