package report

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// ErrNoBrowser is returned by Screenshot when no Chromium or Chrome is installed.
var ErrNoBrowser = errors.New("report: no chromium or chrome found")

// browsers are the names Chromium goes by, in the order they are tried.
var browsers = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// Screenshot renders the HTML file at htmlPath in headless Chromium, in a
// 1400x900 window, and writes a PNG to pngPath. It returns ErrNoBrowser when
// none is installed, and when ctx ends it stops the browser and returns
// ctx.Err() joined. The browser runs without its sandbox (it refuses to start
// as root otherwise): render only pages you made.
func Screenshot(ctx context.Context, htmlPath, pngPath string) error {
	bin := ""
	for _, name := range browsers {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		return ErrNoBrowser
	}
	page, err := filepath.Abs(htmlPath)
	if err != nil {
		return fmt.Errorf("report: screenshot: %w", err)
	}
	png, err := filepath.Abs(pngPath)
	if err != nil {
		return fmt.Errorf("report: screenshot: %w", err)
	}
	// A profile of its own, so that a browser already running does not
	// capture the request.
	profile, err := os.MkdirTemp("", "screenshot-profile-")
	if err != nil {
		return fmt.Errorf("report: screenshot: %w", err)
	}
	defer os.RemoveAll(profile)

	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions",
		"--user-data-dir="+profile, "--screenshot="+png, "--window-size=1400,900",
		(&url.URL{Scheme: "file", Path: filepath.ToSlash(page)}).String())
	ownGroup(cmd)
	cmd.WaitDelay = 5 * time.Second // output pipes held by orphaned helpers
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return errors.Join(errors.New("report: screenshot: browser stopped"), ctx.Err())
	}
	if err != nil {
		return fmt.Errorf("report: screenshot: %s: %w: %s", filepath.Base(bin), err, tail(out))
	}
	if _, err := os.Stat(png); err != nil {
		return fmt.Errorf("report: screenshot: %s wrote no image: %s", filepath.Base(bin), tail(out))
	}
	return nil
}

// tail returns the end of a browser's output, for error messages.
func tail(out []byte) string {
	const n = 600
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return string(out)
}
