package checker

import (
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// ms is n milliseconds.
func ms(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }

// builder writes histories by hand, with times in milliseconds.
type builder struct{ h history.History }

func newBuilder(nodes int) *builder { return &builder{history.History{Nodes: nodes}} }

func (b *builder) add(op history.Op) int {
	op.ID = len(b.h.Ops) + 1
	b.h.Ops = append(b.h.Ops, op)
	return op.ID
}

// acquire adds a successful acquire of "k" valid for valid ms after it returned.
func (b *builder) acquire(client int, inv, comp, valid float64, token uint64) int {
	return b.add(history.Op{Kind: history.KindAcquire, Client: client, Key: "k", Invoke: ms(inv), Complete: ms(comp),
		Outcome: history.OK, Token: token, Value: fmt.Sprintf("v%d", len(b.h.Ops)+1), ValidUntil: ms(comp + valid)})
}

func (b *builder) failedAcquire(client int, inv, comp float64) int {
	return b.add(history.Op{Kind: history.KindAcquire, Client: client, Key: "k", Invoke: ms(inv), Complete: ms(comp),
		Outcome: history.Failed, Err: "not acquired"})
}

func (b *builder) held(kind history.Kind, hold int, inv, comp float64, out history.Outcome) history.Op {
	a := b.h.Ops[hold-1]
	return history.Op{Kind: kind, Client: a.Client, Key: a.Key, Hold: hold, Token: a.Token, Value: a.Value,
		Invoke: ms(inv), Complete: ms(comp), Outcome: out}
}

func (b *builder) release(hold int, inv, comp float64) int {
	return b.add(b.held(history.KindRelease, hold, inv, comp, history.OK))
}

// extend adds an extend of hold that ends with out, valid for valid ms after it returned.
func (b *builder) extend(hold int, inv, comp, valid float64, out history.Outcome) int {
	op := b.held(history.KindExtend, hold, inv, comp, out)
	if out == history.OK {
		op.ValidUntil = ms(comp + valid)
	}
	return b.add(op)
}

// recreate sets the nodes extend op id re-created its hold's key on.
func (b *builder) recreate(id int, nodes ...int) { b.h.Ops[id-1].Reacquired = nodes }

func (b *builder) lost(hold int, at float64) int {
	return b.add(b.held(history.KindLost, hold, at, at, history.OK))
}

// write adds a write of entry to resource "r"; seq 0 means not given.
func (b *builder) write(hold int, entry string, inv, comp float64, out history.Outcome, seq uint64) int {
	op := b.held(history.KindWrite, hold, inv, comp, out)
	op.Resource, op.Entry, op.Seq = "r", entry, seq
	return b.add(op)
}

func (b *builder) fault(kind fault.Kind, target int, start, end float64) int {
	op := history.Op{Kind: history.KindFault, Fault: kind, Invoke: ms(start), Complete: ms(end), Outcome: history.OK}
	if kind.ClientSide() {
		op.Client = target
	} else {
		op.Node = target
	}
	return b.add(op)
}

// cycle adds a clean acquire, write, release by client from t ms, taking 10 ms.
func (b *builder) cycle(client int, t float64, token uint64, seq uint64) int {
	a := b.acquire(client, t, t+1, 50, token)
	b.write(a, fmt.Sprintf("e%d", token), t+2, t+3, history.OK, seq)
	b.release(a, t+8, t+9)
	return a
}

// clean adds n clean cycles by clients 0..2 in turn, from t ms, with tokens
// and seqs from first; it returns the time after them.
func (b *builder) clean(n int, t float64, first uint64) float64 {
	for i := range n {
		b.cycle(i%3, t, first+uint64(i), first+uint64(i))
		t += 10
	}
	return t
}

// done sets the final store to every accepted write and the end to end ms.
func (b *builder) done(end float64) history.History {
	b.h.Final = map[string][]string{}
	for _, op := range b.h.Ops {
		if op.Kind == history.KindWrite && op.Outcome == history.OK {
			b.h.Final[op.Resource] = append(b.h.Final[op.Resource], op.Entry)
		}
	}
	b.h.End = ms(end)
	return b.h
}
