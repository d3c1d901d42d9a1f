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

// checkGranted checks every granted list against the node count of the run
// line: without one, the indexes cannot be checked, so they are refused.
func (p *parser) checkGranted(nodes int) error {
	for _, l := range p.ops {
		for _, n := range l.op.Granted {
			if nodes == 0 {
				return &LineError{Line: l.n, Field: "granted", Err: errNoNodeCount}
			}
			if n >= nodes {
				return &LineError{Line: l.n, Field: "granted",
					Err: fmt.Errorf("node %d is not below the run line's node count %d", n, nodes)}
			}
		}
	}
	return nil
}
