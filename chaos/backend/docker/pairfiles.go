package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/moby/moby/client"

	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
)

// A pair's servers are never created anew (Sentinel knows each by its
// address on the network, which a new container may not get), so what a
// plain node gets from a new container, a pair's server gets from files
// written into its container while it is stopped, through the Docker API
// (the image has no shell to run):
//
//   - its data directory, pairDataDir, is a symlink to /data/gen<N>; a
//     restart without data points it at a new, empty generation, so the
//     server starts with no data at all (the old generations stay in the
//     container, which is removed with them at Close);
//   - its clock: the dynamic loader preloads what /etc/ld.so.preload lists,
//     and libfaketime, with no FAKETIME in the environment, reads the spec
//     from /etc/faketimerc. Both files empty is the real clock, with no
//     libfaketime loaded; the rest of faketime.Env's recipe is in the
//     container's environment from its creation (pairEnv).
const (
	pairDataDir  = "/data/cur"
	preloadPath  = "/etc/ld.so.preload"
	faketimeRC   = "/etc/faketimerc"
	preloadVar   = "LD_PRELOAD"
	faketimeVar  = "FAKETIME"
	genDirPrefix = "gen"
)

// pairEnv is the environment of a pair's containers: faketime.Env's,
// but for the variables the files above give. It changes nothing while
// libfaketime is not preloaded.
func pairEnv() map[string]string {
	env := make(map[string]string)
	for k, v := range clockEnv("+0") {
		if k != preloadVar && k != faketimeVar {
			env[k] = v
		}
	}
	return env
}

// clockEnv is faketime.Env for spec, by variable.
func clockEnv(spec string) map[string]string {
	env := make(map[string]string)
	for _, kv := range faketime.Env(faketimePath, spec) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// newGeneration points srv's data directory at a new, empty generation.
// The server must be stopped (or not yet started).
func (d *Backend) newGeneration(ctx context.Context, srv *server) error {
	gen := genDirPrefix + strconv.Itoa(srv.gen+1)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdrs := []*tar.Header{
		{Typeflag: tar.TypeDir, Name: gen + "/", Mode: 0o755},
		{Typeflag: tar.TypeSymlink, Name: strings.TrimPrefix(pairDataDir, "/data/"), Linkname: gen, Mode: 0o777},
	}
	for _, h := range hdrs {
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := d.copyTo(ctx, srv, "/data", &buf); err != nil {
		return fmt.Errorf("new data directory: %w", err)
	}
	srv.gen++
	return nil
}

// setClock writes the files that run srv's redis-server on spec's clock
// from its next start ("" for the real clock).
func (d *Backend) setClock(ctx context.Context, srv *server, spec string) error {
	var preload, rc string
	if spec != "" {
		env := clockEnv(spec)
		preload, rc = env[preloadVar]+"\n", env[faketimeVar]+"\n"
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct{ path, body string }{{preloadPath, preload}, {faketimeRC, rc}} {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f.path, "/etc/"), Mode: 0o644, Size: int64(len(f.body))}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := d.copyTo(ctx, srv, "/etc", &buf); err != nil {
		return fmt.Errorf("clock %q: %w", spec, err)
	}
	return nil
}

// copyTo extracts the tar archive in buf into dir of srv's container.
func (d *Backend) copyTo(ctx context.Context, srv *server, dir string, buf *bytes.Buffer) error {
	_, err := d.cli.CopyToContainer(ctx, srv.ctr.GetContainerID(), client.CopyToContainerOptions{DestinationPath: dir, Content: buf})
	return err
}
