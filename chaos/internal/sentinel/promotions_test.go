package sentinel

import (
	"testing"
	"time"
)

// TestPromotionsListenNilEndsTheReports: a run stops listening as it
// ends (Listen(nil)) and then takes its history; a promotion still being
// reported must not reach the old listener after Listen(nil) returned, or
// it is recorded into a run that is over (and missing from its history).
// Here the report is in flight when Listen(nil) is called: Listen(nil)
// must wait for it, or the listener must not be called after.
func TestPromotionsListenNilEndsTheReports(t *testing.T) {
	var p Promotions
	entered, release := make(chan struct{}), make(chan struct{})
	after := make(chan bool, 1) // whether the listener ran on after Listen(nil) returned
	stopped := make(chan struct{})
	p.Listen(func(int, time.Time) {
		close(entered)
		<-release
		select {
		case <-stopped:
			after <- true
		default:
			after <- false
		}
	})
	go p.Promoted(0)
	<-entered
	listening := make(chan struct{})
	go func() {
		p.Listen(nil)
		close(stopped)
		close(listening)
	}()
	// A Listen(nil) that waits for the report in flight has not returned
	// yet; one that does not has, and the listener goes on after it.
	select {
	case <-listening:
	case <-time.After(time.Second): // a bound on a Listen that waits, as it should
	}
	close(release)
	if <-after {
		t.Fatal("the listener was still delivering a promotion after Listen(nil) returned")
	}
	<-listening
}
