package checker

import "flag"

// update is shared by the golden tests of this package and of history_test.
var update = flag.Bool("update", false, "rewrite the golden histories in testdata")

// UpdateGoldens is update, for the external tests.
var UpdateGoldens = update
