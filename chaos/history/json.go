package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
)

// Encode writes h as JSON with one op per line, so that histories kept as
// test files diff well. Decode (or encoding/json) reads it back.
func Encode(w io.Writer, h History) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "{\n\"nodes\": %d,\n\"end_ns\": %d,\n", h.Nodes, int64(h.End))
	if h.Final != nil {
		bw.WriteString("\"final\": {")
		for i, res := range slices.Sorted(maps.Keys(h.Final)) {
			k, err := json.Marshal(res)
			if err != nil {
				return err
			}
			v, err := json.Marshal(h.Final[res])
			if err != nil {
				return err
			}
			if i > 0 {
				bw.WriteString(",")
			}
			fmt.Fprintf(bw, "\n  %s: %s", k, v)
		}
		bw.WriteString("\n},\n")
	}
	bw.WriteString("\"ops\": [")
	for i, op := range h.Ops {
		b, err := json.Marshal(op)
		if err != nil {
			return err
		}
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n  ")
		bw.Write(b)
	}
	bw.WriteString("\n]\n}\n")
	return bw.Flush()
}

// Decode reads a History written by Encode or encoding/json, and checks that
// op IDs are positions and that ops name holds that exist.
func Decode(r io.Reader) (History, error) {
	var h History
	if err := json.NewDecoder(r).Decode(&h); err != nil {
		return History{}, fmt.Errorf("history: %w", err)
	}
	if err := validate(h); err != nil {
		return History{}, fmt.Errorf("history: %w", err)
	}
	return h, nil
}
