package checker

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

var writeHistory = flag.String("write-history", "",
	"write the history BenchmarkCheck generates to `FILE` instead of checking it, to time `fencedlock check` on it")

// benchShapes are the histories BenchmarkCheck judges, each generated to
// about a given number of lines.
var benchShapes = []struct {
	name string
	gen  func(lines int) []byte
}{
	{"many-keys", manyKeys},
	{"repeated-token", repeatedToken},
	{"contended", contended},
}

// BenchmarkCheck reads and checks generated histories of growing length, as
// `fencedlock check` does: the time per line stays about flat when both are
// O(n log n) in the history.
func BenchmarkCheck(b *testing.B) {
	for _, sh := range benchShapes {
		for _, lines := range []int{10_000, 100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/%s", sh.name, lineCount(lines)), func(b *testing.B) {
				data := sh.gen(lines)
				n := bytes.Count(data, []byte("\n"))
				if *writeHistory != "" {
					if err := os.WriteFile(*writeHistory, data, 0o644); err != nil {
						b.Fatal(err)
					}
					b.Skip("written to ", *writeHistory)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				cpu := cpuTime()
				b.ResetTimer()
				for b.Loop() {
					h, err := history.ReadJSONL(bytes.NewReader(data))
					if err != nil {
						b.Fatal(err)
					}
					if res := Check(h, CheckOptions{}); res.Verdict == "" {
						b.Fatal("no verdict")
					}
				}
				b.StopTimer()
				cpu = cpuTime() - cpu
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/line")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(n), "cpu-ns/line")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N)/1e6, "allocMB/op")
			})
		}
	}
}

func lineCount(n int) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dk", n/1_000)
}

// benchLines appends history lines with times in microseconds.
type benchLines struct{ buf bytes.Buffer }

func (l *benchLines) line(format string, args ...any) {
	fmt.Fprintf(&l.buf, format, args...)
	l.buf.WriteByte('\n')
}

func (l *benchLines) acquire(client int, key string, inv, comp time.Duration, token uint64, lease time.Duration) {
	if token == 0 {
		l.line(`{"kind":"acquire","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":"failed","err":"not acquired"}`,
			client, key, inv, comp)
		return
	}
	l.line(`{"kind":"acquire","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":"ok","token":%d,"value":"v%d","valid_until_ns":%d}`,
		client, key, inv, comp, token, token, inv+lease)
}

func (l *benchLines) held(kind string, client int, key string, inv, comp time.Duration, token uint64, extra string) {
	l.line(`{"kind":%q,"client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":"ok","token":%d%s}`,
		kind, client, key, inv, comp, token, extra)
}

func (l *benchLines) fault(kind string, node int, start, end time.Duration) {
	l.line(`{"kind":"fault","fault":%q,"node":%d,"invoke_ns":%d,"complete_ns":%d,"outcome":"ok"}`, kind, node, start, end)
}

// manyKeys is lines/2 keys, each acquired and released once by one of 8
// clients, the holds of neighbouring keys overlapping, and a majority of the
// 5 nodes cut off for a moment every 1000 keys.
func manyKeys(lines int) []byte {
	var l benchLines
	keys := lines / 2
	l.line(`{"kind":"run","nodes":5,"start_ns":0,"end_ns":%d}`, time.Duration(keys+100)*100*time.Microsecond)
	for i := range keys {
		t := time.Duration(i) * 100 * time.Microsecond
		key := fmt.Sprintf("k%d", i)
		l.acquire(i%8, key, t, t+time.Millisecond, 1, 30*time.Millisecond)
		l.held("release", i%8, key, t+2*time.Millisecond, t+3*time.Millisecond, 1, "")
		if i%1000 == 999 {
			for n := range 3 {
				l.fault("partition", n, t, t+50*time.Microsecond)
			}
		}
	}
	return l.buf.Bytes()
}

// repeatedToken is one client acquiring and releasing one key lines/2 times,
// every hold with token 1.
func repeatedToken(lines int) []byte {
	var l benchLines
	holds := lines / 2
	l.line(`{"kind":"run","nodes":5,"start_ns":0,"end_ns":%d}`, time.Duration(holds+1)*5*time.Millisecond)
	for i := range holds {
		t := time.Duration(i) * 5 * time.Millisecond
		l.acquire(0, "k", t, t+time.Millisecond, 1, 30*time.Millisecond)
		l.held("release", 0, "k", t+2*time.Millisecond, t+3*time.Millisecond, 1, "")
	}
	return l.buf.Bytes()
}

// contended is 16 clients taking turns on one key: each turn every client
// asks while the last holder still holds it, the winner gets it once the
// last holder released it, writes under its token, extends it and holds it
// until the next turn; every hundredth turn one client waits through twenty
// turns and gives up; and the faults come and go: a node killed, a node
// slowed, a majority cut off.
func contended(lines int) []byte {
	const clients = 16
	const perTurn = clients + 3 // acquires, write, extend, release
	var l benchLines
	turns := lines / perTurn
	turn := 2 * time.Millisecond
	us := time.Microsecond
	var entries []string
	l.line(`{"kind":"run","nodes":5,"start_ns":0,"end_ns":%d}`, time.Duration(turns+20)*turn) // past the last fault
	for i := range turns {
		t := time.Duration(i) * turn
		winner, token := i%clients, uint64(i+1)
		for c := range clients {
			inv := t + time.Duration(c)*10*us
			switch {
			case c == winner:
				l.acquire(c, "k", inv, t+350*us, token, 30*time.Millisecond)
			case i%100 == 0 && i+20 < turns && c == (winner+1)%clients:
				l.acquire(c, "k", inv, inv+20*turn, 0, 0) // a long wait that gives up
			default:
				l.acquire(c, "k", inv, t+350*us, 0, 0)
			}
		}
		if i > 0 {
			l.held("release", (i-1)%clients, "k", t+200*us, t+300*us, token-1, "")
		}
		entry := fmt.Sprintf("e%d", i)
		entries = append(entries, entry)
		l.held("write", winner, "k", t+400*us, t+500*us, token,
			fmt.Sprintf(`,"resource":"r","entry":%q,"seq":%d`, entry, i+1))
		l.held("extend", winner, "k", t+600*us, t+700*us, token, fmt.Sprintf(`,"valid_until_ns":%d`, t+40*time.Millisecond))
		switch i % 50 {
		case 10:
			l.fault("kill", i%5, t, t+5*turn)
		case 20:
			l.fault("latency", (i+1)%5, t, t+5*turn)
		case 30:
			for n := range 3 {
				l.fault("partition", n, t+200*us, t+1500*us)
			}
		}
	}
	last := time.Duration(turns) * turn
	l.held("release", (turns-1)%clients, "k", last+200*us, last+300*us, uint64(turns), "")
	fmt.Fprintf(&l.buf, `{"kind":"store","resource":"r","entries":[`)
	for i, e := range entries {
		if i > 0 {
			l.buf.WriteByte(',')
		}
		fmt.Fprintf(&l.buf, "%q", e)
	}
	l.buf.WriteString("]}\n")
	return l.buf.Bytes()
}
