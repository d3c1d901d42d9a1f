package recorder

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// A Sink keeps what a Recorder records: JSONL writes it as JSON Lines,
// Memory keeps it as a history.History. The Recorder calls its sink under
// its own lock, in the order of the stamps.
type Sink interface {
	open(run run)                            // once, from New
	client(name string)                      // a new client; its index is the number of clients before it
	record(op history.Op)                    // an operation invoked (Outcome Pending), then again completed
	store(resource string, entries []string) // the final contents of a store resource
	close() error                            // Close was called
}

// run is what a sink learns of its Recorder.
type run struct {
	nodes int                  // lock nodes; 0: not recorded
	start time.Time            // the history clock's zero, on the Recorder's clock
	now   func() time.Duration // the current time on the history clock
}
