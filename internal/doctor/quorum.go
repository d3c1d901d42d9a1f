package doctor

import "fmt"

// minTolerant is the smallest set of nodes that tolerates a node failure:
// a quorum of N/2+1 out of 3 is 2, so one node may fail; out of 2 it is 2,
// and out of 1 it is 1, so no node may.
const minTolerant = 3

// Tolerance warns about a set of nodes in which no node may fail, or
// returns "".
func Tolerance(n int) string {
	if n >= minTolerant {
		return ""
	}
	return fmt.Sprintf("%s: a quorum is %d, so no node may fail or restart (nothing is fault tolerant); use at least %d",
		plural(n, "node"), n/2+1, minTolerant)
}

func quorumFindings(n int) []Finding {
	if w := Tolerance(n); w != "" {
		return []Finding{{Check: "quorum", Status: Warn, Reason: w, Fix: "give --nodes at least 3 independent servers (5 tolerate two failures)"}}
	}
	return []Finding{{Check: "quorum", Status: OK,
		Reason: fmt.Sprintf("%d nodes: a quorum is %d, so %s may fail", n, n/2+1, plural(n-(n/2+1), "node"))}}
}
