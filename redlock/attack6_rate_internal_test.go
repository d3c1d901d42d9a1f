package redlock

import (
	"context"
	"testing"
	"time"
)

// Once the ramp is over, a waiting head announces itself at most every
// presentEvery, as before the ramp. A head with a short backoff calls
// present at every sleep of its loop, so the rate limit alone decides. Found
// by attack 6 on the ramp's first version, whose limit was three quarters
// of the gap (the timer was reset just before the announcement's time was
// taken): one announcement every 190 ms, a third more than before, for as
// long as the head waited.
func TestAttack6SteadyAnnouncementRateWithShortBackoff(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, heard, lcancel, done := watchPresence(t, ctx, "attack6-rate", 2*time.Millisecond)
	// The ramp is five announcements (presentFirst doubling to
	// presentEvery); then nine more, eight steady gaps.
	const ramp, steady = 5, 8
	at := announcements(t, ctx, heard, lcancel, done, ramp+steady+1)
	gaps(t, at)
	// The span of the steady gaps telescopes: delivery jitter counts at its
	// two ends only.
	span := at[len(at)-1].Sub(at[ramp])
	if mean := span / steady; mean < presentEvery*7/8 {
		t.Errorf("after the ramp, one announcement every %v on average, want every %v (at most every presentEvery)", mean, presentEvery)
	}
}
