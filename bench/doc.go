// Package bench holds side-by-side benchmarks of fencedlock against other
// Redis lock libraries (go-redsync/redsync, bsm/redislock) and against the
// raw protocol floor: the same commands fencedlock sends, with no library
// logic. It is a module of its own so that the library never depends on its
// rivals.
//
// The Go benchmarks (bench_test.go) compare serial and parallel
// acquire+release in one `go test -bench . -benchmem` run; cmd/lockbench runs
// every scenario, prints the table and the target ratios, and writes JSON and
// an SVG chart. See README.md.
package bench
