package chaos

import (
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// What a client process and Run say to each other (Config.ClientProcs), as
// JSON lines. Run writes the procSettings on the process's stdin, then
// procCommands; closing stdin ends the workload. The process writes
// procEvents on its stdout: a hello first, then each op of its history as it
// is invoked and again as it completes, so that an op in flight when the
// process dies is known to Run, which completes it as failed.

// ClientProcEnv is set, to "1", in the environment of the client processes
// that Run starts for Config.ClientProcs: see ClientMain.
const ClientProcEnv = "FENCEDLOCK_CHAOS_CLIENT"

// procSettings is what a client process runs: the first line on its stdin.
type procSettings struct {
	Client      int           `json:"client"`
	Addrs       []string      `json:"addrs"` // the lock nodes
	Store       string        `json:"store"` // the fenced store's server
	Nodes       int           `json:"nodes"`
	TTL         time.Duration `json:"ttl"`
	NodeTimeout time.Duration `json:"node_timeout"`
	Seed        uint64        `json:"seed"`
	// Lock and Replicas are the run's (Config.Lock, Config.Replicas): the
	// lock the client drives, a fencedlock variant; "" is fencedlock.
	Lock     string `json:"lock,omitempty"`
	Replicas bool   `json:"replicas,omitempty"`
	// ClockRate, if not zero, runs the client's clock.Clock at that rate of
	// the real one (client-clock-skew).
	ClockRate float64 `json:"clock_rate,omitempty"`
	// KillTrigger asks for the kill-during-acquire hooks on the client's
	// node connections.
	KillTrigger bool `json:"kill_trigger,omitempty"`
}

// The commands Run sends to a client process after its settings.
const (
	cmdStart  = "start"  // the run starts: begin the workload
	cmdPause  = "pause"  // client-pause: ask to be stopped in the next critical section
	cmdSkew   = "skew"   // client-clock-skew: work up to the validity on the next hold
	cmdLate   = "late"   // late-write: write again once the next hold is over
	cmdResume = "resume" // the stop is over (sent just before SIGCONT)
	cmdArm    = "arm"    // kill-during-acquire: fire when an acquire script is about to reach Node
	cmdDisarm = "disarm" // kill-during-acquire: do not fire for Node
	cmdKilled = "killed" // kill-during-acquire: Node is killed, send the script on
)

type procCommand struct {
	Cmd  string `json:"cmd"`
	Node int    `json:"node,omitempty"`
}

// procEvent is one line a client process writes: one field is set.
type procEvent struct {
	Hello *procHello  `json:"hello,omitempty"`
	Op    *history.Op `json:"op,omitempty"`
	// Stop says that the client acquired the hold with this token and waits,
	// before its write, to be stopped (cmdPause).
	Stop *uint64 `json:"stop,omitempty"`
	// Fire says that an acquire script is about to reach this node, and
	// waits for cmdKilled (cmdArm).
	Fire *int `json:"fire,omitempty"`
}

type procHello struct {
	PID int `json:"pid"`
	// Start is when the process's history clock starts, on the shared
	// clock of the machine (see sharedNow), to within StartError.
	Start      int64         `json:"start_ns"`
	StartError time.Duration `json:"start_error_ns"`
}

// lineWriter writes JSON lines, one Write each, for several goroutines.
type lineWriter struct {
	mu  sync.Mutex // protects w, err
	w   io.Writer
	err error // the first write error: later writes are dropped
}

func (lw *lineWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.err == nil {
		_, lw.err = lw.w.Write(append(b, '\n'))
	}
	return lw.err
}

// historyStart returns when rec's clock started, on the shared clock:
// a shared-clock reading taken next to a time.Now, less the recorder's
// offset of that time.Now. The pair whose two shared-clock readings lie
// closest together (a preemption between them spoils a pair) is used; the
// time.Now lies between those two readings, and start is taken at their
// middle, so it is off by at most errBound, half their gap.
func historyStart(rec *recorder.Recorder) (start int64, errBound time.Duration) {
	best, gap := int64(0), int64(-1)
	for range 16 {
		s1 := sharedNow()
		t := time.Now()
		s2 := sharedNow()
		if g := s2 - s1; gap < 0 || g < gap {
			best, gap = s1+g/2-int64(rec.Offset(t)), g
		}
		if gap < int64(20*time.Microsecond) {
			break
		}
	}
	return best, time.Duration(gap+1) / 2 // rounded up
}
