package report

// ClientProc is a workload client that ran as an OS process of its own
// (chaos.Config.ClientProcs).
type ClientProc struct {
	Client int    `json:"client"`
	PID    int    `json:"pid"`
	Exit   string `json:"exit"`            // how it ended: "exit status 0", "signal: killed", ...
	Stops  []Stop `json:"stops,omitempty"` // its client-pause stops
}

// Stop is a client-pause of a client process: SIGSTOP in its critical
// section (acquired, not yet written), held past its validity, then
// SIGCONT. Times are on the history clock.
type Stop struct {
	Token        uint64  `json:"token"` // the hold's fencing token
	AtMs         float64 `json:"at_ms"` // the SIGSTOP
	ForMs        float64 `json:"for_ms"`
	ValidUntilMs float64 `json:"valid_until_ms"` // the hold's validity end
}
