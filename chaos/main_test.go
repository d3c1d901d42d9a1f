package chaos_test

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial errors to killed nodes are the point here
	// Runs with ClientProcs start the test binary as their clients.
	// syscall.Exit, not os.Exit: under -race, os.Exit waits a second for
	// the race detector's report.
	if status, ok := chaos.ClientMain(); ok {
		syscall.Exit(status)
	}
	if os.Getenv(printTimeEnv) != "" { // see TestLibfaketimeMissesGo
		fmt.Println(time.Now().Unix())
		syscall.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
