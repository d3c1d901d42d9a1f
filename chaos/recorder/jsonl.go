package recorder

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sync"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// JSONL is a Sink that writes the history to an io.Writer in the JSON Lines
// format (history.ReadJSONL's, docs/history-format.md), stamps in
// nanoseconds on the Recorder's clock (Unix time with the default clock).
// It writes each operation as one line, in one Write, when it completes;
// Recorder.Close writes the operations still in flight as never completed.
// Make one with NewJSONL.
type JSONL struct {
	mu      sync.Mutex // protects the fields below
	w       io.Writer
	err     error
	base    int64           // the stamp of the history clock's zero
	clients history.History // names the clients of the lines
	pending map[int]history.Op
}

var _ Sink = (*JSONL)(nil)

// NewJSONL returns a JSONL sink that writes to w.
func NewJSONL(w io.Writer) *JSONL { return &JSONL{w: w, pending: map[int]history.Op{}} }

func (j *JSONL) open(r run) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.base = r.start.UnixNano()
	// Always a run line, for the format version: the run lines of several
	// Recorders' files agree, so the files can be concatenated.
	j.write(history.Line{Kind: history.LineRun, Version: history.FormatVersion, Nodes: r.nodes})
}

func (j *JSONL) client(name string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.clients.Clients = append(j.clients.Clients, name)
}

// record keeps an op in flight, and writes it once complete.
func (j *JSONL) record(op history.Op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if op.Outcome == history.Pending {
		j.pending[op.ID] = op
		return
	}
	delete(j.pending, op.ID)
	j.writeOp(op)
}

// writeOp writes the line of op, its times moved from the history clock's
// offsets to stamps. Call with mu held.
func (j *JSONL) writeOp(op history.Op) {
	l := j.clients.Line(op)
	for _, t := range []*int64{l.Invoke, l.Complete, l.ValidUntil} {
		if t != nil {
			*t += j.base
		}
	}
	j.write(l)
}

func (j *JSONL) store(resource string, entries []string) {
	if entries == nil {
		entries = []string{} // the format wants the list, even empty
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.write(history.Line{Kind: history.LineStore, Resource: resource, Entries: entries})
}

// close writes the operations still in flight, in the order they began.
func (j *JSONL) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	ids := make([]int, 0, len(j.pending))
	for id := range j.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		j.writeOp(j.pending[id])
	}
	clear(j.pending)
	return j.err
}

// write encodes l and writes it in one Write, keeping the first error;
// after one, nothing more is written. Call with mu held.
func (j *JSONL) write(l history.Line) {
	if j.err != nil {
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if j.err = enc.Encode(l); j.err == nil {
		_, j.err = j.w.Write(buf.Bytes())
	}
}

// Err returns the first error writing to the Writer; after one, nothing
// more is written.
func (j *JSONL) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}
