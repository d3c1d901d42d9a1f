package history

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// maxSpan bounds how far from the start of a history a time may be (about
// 36 years), so that no sum of durations the checker makes can overflow.
const maxSpan = int64(1) << 60

// ReadJSONL reads a history in the JSON Lines format (see WriteJSONL and
// docs/history-format.md). Blank lines are skipped. The first line that
// cannot be read, or that breaks the format, gives a *LineError naming the
// line and the field; nothing is skipped silently. Times are made offsets
// from the run line's start_ns, or else from the earliest invocation. Ops
// are ordered by invocation (acquires first among equals, then by line) and
// numbered in that order; clients given as numbers keep them as indexes,
// clients given by name are numbered in order of first appearance and
// named in History.Clients. A version 1 history is read by the version 1
// rules; ReadJSONLWarn says so, ReadJSONL does not.
func ReadJSONL(r io.Reader) (History, error) {
	h, _, err := ReadJSONLWarn(r)
	return h, err
}

// ReadJSONLWarn is ReadJSONL, and returns warnings too: when the history
// has no version (version 1), one for that, and one for each line that the
// current rules refuse and the version 1 rules let pass.
func ReadJSONLWarn(r io.Reader) (History, []Warning, error) {
	var p parser
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			if perr := p.line(n, raw); perr != nil {
				return History{}, nil, perr
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return History{}, nil, fmt.Errorf("history: line %d: %w", n, err)
		}
	}
	return p.history()
}

// parsed is one line, read and checked on its own.
type parsed struct {
	n        int
	kind     string
	client   string // as written: a number or a name
	numeric  bool   // client was a number
	op       Op     // times absolute, not yet offsets
	hasValid bool
	entries  []string // store
	run      runFields
}

// runFields are the fields of the run lines; nil means not given.
type runFields struct {
	version, nodes, clockError, start, end *int64
}

type parser struct {
	ops       []parsed // operations and faults
	stores    []parsed
	storeLine map[string]int // the line of each resource's store line
	run       *parsed        // the run lines' fields, merged; n is the first run line
	// refused are what the current rules refuse and the version 1 rules
	// let pass; which apply is known once every line was read.
	refused []*LineError
}

// fields is a line's object, read field by field so that an error names its
// field.
type fields struct {
	n       int
	m       map[string]json.RawMessage
	refused *[]*LineError // the parser's
}

// identities are the string fields that name something (a lock, a client,
// a resource, a write, a hold's value): each must read back as written, or
// two names could read as one.
var identities = []string{"key", "client", "resource", "entry", "value"}

func (f fields) err(field, format string, args ...any) *LineError {
	return &LineError{Line: f.n, Field: field, Err: fmt.Errorf(format, args...)}
}

// has reports whether name is present and not null.
func (f fields) has(name string) bool {
	raw, ok := f.m[name]
	return ok && string(bytes.TrimSpace(raw)) != "null"
}

func (f fields) str(name string, required bool) (string, error) {
	if !f.has(name) {
		if required {
			return "", f.err(name, "missing")
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(f.m[name], &s); err != nil {
		return "", f.err(name, "want a string, got %s", f.m[name])
	}
	if slices.Contains(identities, name) {
		if err := intact(f.m[name]); err != nil {
			*f.refused = append(*f.refused, f.err(name, "%v", err))
		}
	}
	if required && s == "" {
		return "", f.err(name, "empty")
	}
	return s, nil
}

func (f fields) int(name string, required bool) (int64, bool, error) {
	if !f.has(name) {
		if required {
			return 0, false, f.err(name, "missing")
		}
		return 0, false, nil
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(f.m[name])), 10, 64)
	if err != nil {
		return 0, false, f.err(name, "want an integer, got %s", f.m[name])
	}
	return v, true, nil
}

func (f fields) uint(name string, required bool) (uint64, error) {
	if !f.has(name) {
		if required {
			return 0, f.err(name, "missing")
		}
		return 0, nil
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(f.m[name])), 10, 64)
	if err != nil {
		return 0, f.err(name, "want a non-negative integer, got %s", f.m[name])
	}
	return v, nil
}

// allowed lists the fields each kind of line may have.
var allowed = map[string][]string{
	string(KindAcquire): {"client", "key", "invoke_ns", "complete_ns", "outcome", "token", "value", "valid_until_ns", "err", "granted"},
	string(KindExtend):  {"client", "key", "invoke_ns", "complete_ns", "outcome", "token", "value", "valid_until_ns", "err", "granted", "reacquired"},
	string(KindRelease): {"client", "key", "invoke_ns", "complete_ns", "outcome", "token", "value", "err"},
	string(KindWrite):   {"client", "key", "invoke_ns", "complete_ns", "outcome", "token", "value", "resource", "entry", "seq", "err"},
	string(KindLost):    {"client", "key", "invoke_ns", "complete_ns", "outcome", "token", "value"},
	string(KindFault):   {"fault", "node", "client", "invoke_ns", "complete_ns", "outcome", "err"},
	LineStore:           {"resource", "entries"},
	LineRun:             {"version", "nodes", "clock_error_ns", "start_ns", "end_ns"},
	string(KindProbe):   probeFields,
}

// outcomes lists the outcomes each kind of line may have; absent means the
// call never returned (the fault never ended).
var outcomes = map[string][]Outcome{
	string(KindAcquire): {OK, Failed},
	string(KindExtend):  {OK, Failed, LockLost},
	string(KindRelease): {OK, Failed, LockLost},
	string(KindWrite):   {OK, Failed, Rejected},
	string(KindLost):    {OK},
	string(KindFault):   {OK, Failed},
	string(KindProbe):   {OK, Failed},
}

func (p *parser) line(n int, raw []byte) error {
	f := fields{n: n, refused: &p.refused}
	if err := json.Unmarshal(raw, &f.m); err != nil || f.m == nil {
		return &LineError{Line: n, Err: fmt.Errorf("not a JSON object: %s", strings.TrimSpace(string(raw)))}
	}
	if members(raw) != len(f.m) { // a field given twice: Unmarshal kept the last
		names := repeated(raw)
		if slices.Contains(names, "version") {
			// The version says which rules apply: given twice, which one
			// does is open, and the version 1 rules would let the line
			// say 2 and still have its refusals pass as warnings.
			return f.err("version", "given more than once")
		}
		p.refused = append(p.refused, f.err(names[0], "given more than once (the version 1 rules take the last)"))
	}
	kind, err := f.str("kind", true)
	if err != nil {
		return err
	}
	names, ok := allowed[kind]
	if !ok {
		return f.err("kind", "unknown kind %q (want acquire, extend, release, write, lost, fault, probe, store or run)", kind)
	}
	for _, name := range slices.Sorted(maps.Keys(f.m)) {
		if name != "kind" && !slices.Contains(names, name) {
			return f.err(name, "not a field of a %s line (its fields: %s)", kind, strings.Join(names, ", "))
		}
	}
	switch kind {
	case LineStore:
		return p.store(f)
	case LineRun:
		return p.runLine(f)
	}
	l := parsed{n: n, kind: kind, op: Op{Kind: Kind(kind)}}
	if err := l.common(f); err != nil {
		return err
	}
	switch kind {
	case string(KindFault):
		err = l.fault(f)
	case string(KindProbe):
		err = l.probe(f)
	default:
		err = l.operation(f)
	}
	if err != nil {
		return err
	}
	p.ops = append(p.ops, l)
	return nil
}

// common reads the times and the outcome.
func (l *parsed) common(f fields) error {
	inv, _, err := f.int("invoke_ns", true)
	if err != nil {
		return err
	}
	out, err := f.str("outcome", false)
	if err != nil {
		return err
	}
	l.op.Outcome = Outcome(out)
	if out != "" && !slices.Contains(outcomes[l.kind], l.op.Outcome) {
		return f.err("outcome", "%q is not an outcome of %s (want one of %s, or none if it never completed)",
			out, l.kind, joinOutcomes(outcomes[l.kind]))
	}
	comp, hasComp, err := f.int("complete_ns", false)
	switch {
	case err != nil:
		return err
	case l.kind == string(KindLost):
		l.op.Outcome = OK // seen at one moment
		if !hasComp {
			comp = inv
		} else if comp != inv {
			return f.err("complete_ns", "a lost signal is seen at one moment: want it equal to invoke_ns or absent")
		}
	case out == "" && hasComp:
		return f.err("outcome", "missing, although complete_ns says the call returned")
	case out != "" && !hasComp:
		return f.err("complete_ns", "missing, although the outcome says the call returned")
	case hasComp && comp < inv:
		return f.err("complete_ns", "%d is before invoke_ns %d", comp, inv)
	}
	l.op.Invoke, l.op.Complete = time.Duration(inv), time.Duration(comp)
	l.op.Err, err = f.str("err", false)
	return err
}

func (l *parsed) operation(f fields) error {
	var err error
	if l.client, l.numeric, err = clientOf(f, true); err != nil {
		return err
	}
	if l.op.Key, err = f.str("key", true); err != nil {
		return err
	}
	if l.op.Value, err = f.str("value", false); err != nil {
		return err
	}
	// The token of a successful acquire, and of every op naming its hold.
	needToken := l.kind != string(KindAcquire) || l.op.Outcome == OK
	if l.op.Token, err = f.uint("token", needToken); err != nil {
		return err
	}
	if needToken && l.op.Token == 0 {
		return f.err("token", "0: fencing tokens start at 1")
	}
	if l.kind == string(KindAcquire) || l.kind == string(KindExtend) {
		v, has, err := f.int("valid_until_ns", false)
		if err != nil {
			return err
		}
		if has && l.op.Outcome != OK {
			return f.err("valid_until_ns", "given for a %s that did not succeed", l.kind)
		}
		if has && v <= int64(l.op.Invoke) {
			return f.err("valid_until_ns", "%d is not after invoke_ns %d", v, int64(l.op.Invoke))
		}
		l.op.ValidUntil, l.hasValid = time.Duration(v), has
	}
	if err := l.granted(f); err != nil {
		return err
	}
	if err := l.reacquired(f); err != nil {
		return err
	}
	if l.kind == string(KindWrite) {
		if l.op.Resource, err = f.str("resource", false); err != nil {
			return err
		}
		l.op.Resource = cmp.Or(l.op.Resource, l.op.Key)
		if l.op.Entry, err = f.str("entry", true); err != nil {
			return err
		}
		if l.op.Seq, err = f.uint("seq", false); err != nil {
			return err
		}
	}
	return nil
}

func (l *parsed) fault(f fields) error {
	k, err := f.str("fault", true)
	if err != nil {
		return err
	}
	l.op.Fault = fault.Kind(k)
	if !l.op.Fault.Known() {
		return f.err("fault", "unknown fault kind %q (known: %s)", k, fault.Join(fault.Kinds()))
	}
	if l.op.Fault.ClientSide() {
		if f.has("node") {
			return f.err("node", "a %s fault names a client, not a node", k)
		}
		l.client, l.numeric, err = clientOf(f, true)
		return err
	}
	if f.has("client") {
		return f.err("client", "a %s fault names a node, not a client", k)
	}
	node, _, err := f.int("node", true)
	if err != nil {
		return err
	}
	if node < 0 || node >= 1<<16 {
		return f.err("node", "%d is not a node index", node)
	}
	l.op.Node = int(node)
	return nil
}

// clientOf reads the client: a non-negative integer or a non-empty name.
func clientOf(f fields, required bool) (string, bool, error) {
	if !f.has("client") {
		if required {
			return "", false, f.err("client", "missing")
		}
		return "", false, nil
	}
	raw := bytes.TrimSpace(f.m["client"])
	if len(raw) > 0 && raw[0] == '"' {
		s, err := f.str("client", true)
		return s, false, err
	}
	v, err := strconv.ParseUint(string(raw), 10, 16)
	if err != nil {
		return "", false, f.err("client", "want a name or an index from 0 to 65535, got %s", raw)
	}
	return strconv.FormatUint(v, 10), true, nil
}

func (p *parser) store(f fields) error {
	res, err := f.str("resource", true)
	if err != nil {
		return err
	}
	if !f.has("entries") {
		return f.err("entries", "missing")
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(f.m["entries"], &raws); err != nil {
		return f.err("entries", "want a list of strings")
	}
	entries := make([]string, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &entries[i]); err != nil {
			return f.err("entries", "want a list of strings")
		}
		if err := intact(raw); err != nil {
			p.refused = append(p.refused, f.err("entries", "entry %d: %v", i+1, err))
		}
	}
	if n, dup := p.storeLine[res]; dup {
		return f.err("resource", "%q already has a store line (line %d)", res, n)
	}
	if p.storeLine == nil {
		p.storeLine = map[string]int{}
	}
	p.storeLine[res] = f.n
	p.stores = append(p.stores, parsed{n: f.n, kind: LineStore, op: Op{Resource: res}, entries: entries})
	return nil
}

// runLine reads a run line. Several run lines (the files of several
// processes, concatenated) are one: each field given on more than one must
// have the same value on each.
func (p *parser) runLine(f fields) error {
	var r runFields
	for _, t := range []struct {
		name string
		dst  **int64
	}{{"version", &r.version}, {"nodes", &r.nodes}, {"clock_error_ns", &r.clockError},
		{"start_ns", &r.start}, {"end_ns", &r.end}} {
		v, has, err := f.int(t.name, false)
		if err != nil {
			return err
		}
		if has {
			*t.dst = &v
		}
	}
	switch v := r.version; {
	case v != nil && *v > FormatVersion:
		return f.err("version", "%d is newer than this reader (it reads versions 1 to %d)", *v, FormatVersion)
	case v != nil && *v < 1:
		return f.err("version", "%d is not a version (they start at 1)", *v)
	}
	if r.nodes != nil && (*r.nodes < 1 || *r.nodes > 1<<16) {
		return f.err("nodes", "%d is not a node count", *r.nodes)
	}
	if r.clockError != nil && (*r.clockError < 0 || *r.clockError > maxSpan) {
		return f.err("clock_error_ns", "%d is not a bound on a clock's error", *r.clockError)
	}
	if r.start != nil && r.end != nil && *r.end < *r.start {
		return f.err("end_ns", "%d is before start_ns %d", *r.end, *r.start)
	}
	if p.run == nil {
		p.run = &parsed{n: f.n, kind: LineRun, run: r}
		return nil
	}
	m := &p.run.run
	for _, t := range []struct {
		name      string
		dst, from **int64
	}{{"version", &m.version, &r.version}, {"nodes", &m.nodes, &r.nodes}, {"clock_error_ns", &m.clockError, &r.clockError},
		{"start_ns", &m.start, &r.start}, {"end_ns", &m.end, &r.end}} {
		switch {
		case *t.from == nil:
		case *t.dst == nil:
			*t.dst = *t.from
		case **t.dst != **t.from:
			return f.err(t.name, "%d, but an earlier run line (line %d) says %d", **t.from, p.run.n, **t.dst)
		}
	}
	if m.start != nil && m.end != nil && *m.end < *m.start {
		return f.err("end_ns", "the run lines' end_ns %d is before their start_ns %d", *m.end, *m.start)
	}
	return nil
}

func joinOutcomes(os []Outcome) string {
	s := make([]string, len(os))
	for i, o := range os {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

// intact reports whether the JSON string raw decodes to what it says: valid
// UTF-8, and no \u escape of half a surrogate pair alone. encoding/json reads
// either as U+FFFD, so that "\ud800" and "\udc00" would read as one name.
func intact(raw json.RawMessage) error {
	if !utf8.Valid(raw) {
		return errors.New("not valid UTF-8 (it would read as U+FFFD)")
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r := hex4(raw[i+1:])
		i += 4
		switch {
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Errorf("\\u%04x is half a surrogate pair, alone (it would read as U+FFFD)", r)
		case r >= 0xd800 && r <= 0xdbff:
			if lo := hex4(raw[min(i+3, len(raw)):]); i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' || lo < 0xdc00 || lo > 0xdfff {
				return fmt.Errorf("\\u%04x is half a surrogate pair, alone (it would read as U+FFFD)", r)
			}
			i += 6
		}
	}
	return nil
}

// hex4 reads four hex digits at the start of b, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return -1
	}
	return rune(v)
}

// members counts the members of the JSON object raw (valid JSON): the
// colons outside strings at depth 1. One pass, no allocation.
func members(raw []byte) int {
	n, depth, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ':' && depth == 1:
			n++
		}
	}
	return n
}

// repeated returns the member names of the JSON object raw (valid JSON)
// that an earlier member has, as decoded, in order of their repetition;
// [""] if none (or raw cannot be read again).
func repeated(raw []byte) []string {
	var names []string
	dec := json.NewDecoder(bytes.NewReader(raw))
	seen := map[string]bool{}
	if _, err := dec.Token(); err == nil { // {
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				break
			}
			name, _ := t.(string)
			if seen[name] && !slices.Contains(names, name) {
				names = append(names, name)
			}
			seen[name] = true
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				break
			}
		}
	}
	if len(names) == 0 {
		return []string{""}
	}
	return names
}
