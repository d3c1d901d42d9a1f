package redlock

import "time"

// tally collects an attempt's answers, node by node (a node asked again
// counts with its latest answer), apart from deciding what they mean.
type tally struct {
	q       int
	latest  []reply
	waiting []bool // asked, and the answer is not in yet
}

func newTally(n, q int) *tally {
	t := &tally{q: q, latest: make([]reply, n), waiting: make([]bool, n)}
	for i := range t.waiting {
		t.waiting[i] = true
	}
	return t
}

func (t *tally) add(r reply) {
	t.latest[r.node] = r
	t.waiting[r.node] = false
}

// asked notes that nodes were asked again.
func (t *tally) asked(nodes []int) {
	for _, i := range nodes {
		t.waiting[i] = true
	}
}

type counts struct{ granted, refused, failed, waiting int }

func (t *tally) counts() (c counts) {
	for i, r := range t.latest {
		switch {
		case t.waiting[i]:
			c.waiting++
		case r.granted:
			c.granted++
		case r.err != nil:
			c.failed++
		default:
			c.refused++
		}
	}
	return c
}

// grants are the granting answers.
func (t *tally) grants() []reply {
	var g []reply
	for i, r := range t.latest {
		if !t.waiting[i] && r.granted {
			g = append(g, r)
		}
	}
	return g
}

// refusers are the nodes that answered with another value's hold.
func (t *tally) refusers() []int {
	var s []int
	for i, r := range t.latest {
		if !t.waiting[i] && !r.granted && r.err == nil {
			s = append(s, i)
		}
	}
	return s
}

// holderTTL is the shortest time a refusing holder's key has left (0 when
// unknown): the longest a waiter should sleep.
func (t *tally) holderTTL() time.Duration {
	var d time.Duration
	for i, r := range t.latest {
		if !t.waiting[i] && !r.granted && r.err == nil && r.holderTTL > 0 && (d == 0 || r.holderTTL < d) {
			d = r.holderTTL
		}
	}
	return d
}

// errs are the failed nodes' errors.
func (t *tally) errs() []error {
	var e []error
	for i, r := range t.latest {
		if !t.waiting[i] && r.err != nil {
			e = append(e, r.err)
		}
	}
	return e
}

// wins resolves a split vote. Contenders that each hold a few nodes (none a
// quorum) would all fail and retry into the same split; instead, every
// contender reads the same picture from the refusals (which value holds
// which node) and the same rule picks one: the value with the most grants,
// the smaller value on a tie — values begin with the time their caller began
// to wait (holdValue), so the tie goes to the one that waited longest. The winner keeps its grants and asks the
// others' nodes again; the others step back at once. wins reports whether
// value is the winner and the nodes it holds with the refused ones make a
// quorum. A real holder holds a quorum, more than any contender can: it
// always wins, and a contender steps back.
func (t *tally) wins(value string) bool {
	held := map[string]int{}
	mine, refused := 0, 0
	for i, r := range t.latest {
		switch {
		case t.waiting[i] || r.err != nil:
		case r.granted:
			mine++
		default:
			refused++
			held[r.holder]++
		}
	}
	if mine == 0 || mine+refused < t.q || held[""] > 0 {
		return false // a node where another waiter is first will not grant again
	}
	for v, n := range held {
		if n > mine || (n == mine && v < value) || v == value {
			return false
		}
	}
	return true
}

// failure is what a failed attempt saw, for its waiter.
type failure struct {
	holderTTL time.Duration // how long the holder's key has left; 0 when unknown
	refused   int           // nodes that refused it: where a waiter's place was entered
}

func (t *tally) failure() failure {
	return failure{holderTTL: t.holderTTL(), refused: t.counts().refused}
}
