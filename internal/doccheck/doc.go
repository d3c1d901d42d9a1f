// Package doccheck holds the test that keeps the Go code shown in README.md
// and docs/*.md compiled: each ```go block there must be, byte for byte, a
// Go file of the module or a marked region of one, and so compiles (and, in
// an Example function or an example program's test, runs) with the suite.
//
// A region starts at a line "// doc block: PAGE" (PAGE is README.md or
// docs/NAME.md) and ends at the next "// end doc block"; its lines are
// shown with the marker's indentation taken off.
package doccheck
