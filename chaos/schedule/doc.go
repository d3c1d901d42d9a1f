// Package schedule decides when the chaos harness injects which node fault,
// and carries it out. NewPlan draws a seeded, reproducible Plan from a list
// of fault kinds that never has more than a chosen number of nodes under a
// fault at once (a minority by default); NewHuntPlan draws the hunt profile's
// episodes, each aimed at one assumption of the lock. The same seed gives
// the same Plan. Run executes a Plan against a backend.Backend, reporting
// every fault's start and end to a callback, and undoes what is still
// injected when its ctx ends.
package schedule
