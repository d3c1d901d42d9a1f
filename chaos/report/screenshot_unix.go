//go:build unix

package report

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own, so that cancelling it
// stops the browser's helper processes too, not only the browser.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
