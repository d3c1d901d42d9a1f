// Package hook injects faults from inside a client's connection to a node,
// where no proxy can pick one message out: go-redis hooks that act at the
// moment a chosen command is sent or answered. Trigger calls a function
// (kill a node, say) when a matching command is about to be sent, so a fault
// can hit an acquisition in flight; HealLoss loses or holds back the heals
// of fence counters during a schedule's drop-heal and delay-heal windows.
package hook
