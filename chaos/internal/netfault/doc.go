// Package netfault is the in-process fault proxy in front of every node of
// the chaos backends: a toxiproxy proxy per node whose two gates, one per
// direction, pass, delay or drop the bytes as the node's State says. Faults
// change the State; the proxy, which clients know by a stable address, is
// never reconfigured while it runs.
package netfault
