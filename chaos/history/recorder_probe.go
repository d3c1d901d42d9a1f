package history

import "time"

// ProbeCall is a probe of one node in flight.
type ProbeCall struct {
	r  *Recorder
	id int
}

// ProbeHold records that the harness reads node's state for the key of h,
// for h (after its acquire, an extend or its release).
func (r *Recorder) ProbeHold(h Hold, node int) ProbeCall {
	return ProbeCall{r, r.begin(Op{Kind: KindProbe, Client: h.Client, Key: h.Key, Hold: h.ID, Token: h.Token, Node: node})}
}

// Probe records that the harness reads node's state for key, for client,
// which holds nothing of key (after its acquire failed).
func (r *Recorder) Probe(client int, key string, node int) ProbeCall {
	return ProbeCall{r, r.begin(Op{Kind: KindProbe, Client: client, Key: key, Node: node})}
}

// Found records that the node had the key, with value and a time to live
// of pttl (0: none given); own says the value is one the client's lock
// made for a call that ended before the probe (see Op.Own).
func (c ProbeCall) Found(value string, pttl time.Duration, own bool) {
	c.r.complete(c.id, OK, func(op *Op) { op.Value, op.PTTL, op.Own = value, max(pttl, 0), own })
}

// NoKey records that the node did not have the key.
func (c ProbeCall) NoKey() { c.r.complete(c.id, OK, nil) }

// Fail records that the node did not answer: the probe proves nothing.
func (c ProbeCall) Fail(err error) {
	c.r.complete(c.id, Failed, func(op *Op) { op.Err = errString(err) })
}
