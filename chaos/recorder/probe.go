package recorder

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// Probe records that the harness reads node's state for the key of h, for
// h (after its acquire, an extend or its release).
func (h Hold) Probe(node int) *ProbeCall {
	a := h.acquire // not h.begin: a probe's value is what it found
	return &ProbeCall{h.r, h.r.begin(history.Op{Kind: history.KindProbe, Client: a.Client, Key: a.Key,
		Hold: a.ID, Token: a.Token, Node: node})}
}

// Probe records that the harness reads node's state for key, for the
// client, which holds nothing of key (after its acquire failed).
func (c *Client) Probe(key string, node int) *ProbeCall {
	return &ProbeCall{c.r, c.r.begin(history.Op{Kind: history.KindProbe, Client: c.index, Key: key, Node: node})}
}

// ProbeCall is a probe of one node in flight.
type ProbeCall struct {
	r  *Recorder
	id int
}

// Found records that the node had the key, with value and a time to live
// of pttl (0: none given); own says the value is one the client's lock
// made for a call that ended before the probe (see history.Op.Own).
func (c *ProbeCall) Found(value string, pttl time.Duration, own bool) {
	c.r.complete(c.id, history.OK, nil, func(op *history.Op, _ time.Duration) {
		op.Value, op.PTTL, op.Own = value, max(pttl, 0), own
	})
}

// NoKey records that the node did not have the key.
func (c *ProbeCall) NoKey() { c.r.complete(c.id, history.OK, nil, nil) }

// Fail records that the node did not answer: the probe proves nothing.
func (c *ProbeCall) Fail(err error) { c.r.complete(c.id, history.Failed, err, nil) }
