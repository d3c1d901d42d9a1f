package history

import (
	"bytes"
	"encoding/json"
	"time"
)

// probeFields are the fields of a probe line: which client's read of
// which node, for which key; the hold it was made for (token: the latest
// successful acquire of the key by the client with that token, returned
// before the probe; none after a failed acquire); what the node had:
// value and pttl_ns, both absent when there was no key, and own.
var probeFields = []string{"client", "key", "node", "invoke_ns", "complete_ns", "outcome", "token", "value", "pttl_ns", "own", "err"}

// probe reads a probe line's own fields (common has read the times and
// the outcome).
func (l *parsed) probe(f fields) error {
	var err error
	if l.client, l.numeric, err = clientOf(f, true); err != nil {
		return err
	}
	if l.op.Key, err = f.str("key", true); err != nil {
		return err
	}
	node, _, err := f.int("node", true)
	if err != nil {
		return err
	}
	if node < 0 || node >= 1<<16 {
		return f.err("node", "%d is not a node index", node)
	}
	l.op.Node = int(node)
	if l.op.Token, err = f.uint("token", false); err != nil {
		return err
	}
	if f.has("token") && l.op.Token == 0 {
		return f.err("token", "0: fencing tokens start at 1")
	}
	if l.op.Value, err = f.str("value", false); err != nil {
		return err
	}
	found := l.op.Value != ""
	if f.has("value") && !found {
		return f.err("value", "empty: leave it out when the node had no key")
	}
	if found && l.op.Outcome != OK {
		return f.err("value", "given for a probe that did not succeed")
	}
	pttl, has, err := f.int("pttl_ns", false)
	switch {
	case err != nil:
		return err
	case has && !found:
		return f.err("pttl_ns", "given without a value")
	case has && pttl <= 0:
		return f.err("pttl_ns", "%d: want a positive time to live, or none", pttl)
	case has && pttl > maxSpan:
		return f.err("pttl_ns", "%d is too long", pttl)
	}
	l.op.PTTL = time.Duration(pttl)
	if f.has("own") {
		if err := json.Unmarshal(bytes.TrimSpace(f.m["own"]), &l.op.Own); err != nil {
			return f.err("own", "want true or false, got %s", f.m["own"])
		}
		if l.op.Own && !found {
			return f.err("own", "true without a value")
		}
	}
	return nil
}

// probeLine fills in the fields of a probe's line beyond those of every op.
func probeLine(h History, op Op, l *Line) {
	n := op.Node
	l.Node, l.Client, l.Own = &n, h.clientID(op.Client), op.Own
	if op.PTTL > 0 {
		p := int64(op.PTTL)
		l.PTTL = &p
	}
}
