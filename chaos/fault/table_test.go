package fault

import (
	"slices"
	"testing"
)

// A kind added to the table appears in every list its traits put it in,
// and in no other: the lists are derived, none is written by hand.
func TestNewKindIsDerived(t *testing.T) {
	saved := table
	t.Cleanup(func() { table = saved })
	const node, client Kind = "meteor", "amnesiac-client"
	table = append(slices.Clone(table),
		struct {
			kind Kind
			traits
		}{node, traits{down: true, sched: true, hunted: true}},
		struct {
			kind Kind
			traits
		}{client, traits{client: true, breaks: true}})

	for _, tc := range []struct {
		list       string
		got        []Kind
		node, clnt bool // whether each new kind is in the list
	}{
		{"Kinds", Kinds(), true, true},
		{"Tolerated", Tolerated(), true, false},
		{"AssumptionBreaking", AssumptionBreaking(), false, true},
		{"Scheduled", slices.DeleteFunc(Kinds(), func(k Kind) bool { return !k.Scheduled() }), true, false},
		{"Hunted", slices.DeleteFunc(Kinds(), func(k Kind) bool { return !k.Hunted() }), true, false},
		{"ClientSide", slices.DeleteFunc(Kinds(), func(k Kind) bool { return !k.ClientSide() }), false, true},
	} {
		if slices.Contains(tc.got, node) != tc.node || slices.Contains(tc.got, client) != tc.clnt {
			t.Errorf("%s() = %v: want %s in it %v, %s %v", tc.list, tc.got, node, tc.node, client, tc.clnt)
		}
	}
	if _, err := Parse(string(node) + "," + string(client)); err != nil {
		t.Errorf("Parse of the new kinds: %v", err)
	}
}
