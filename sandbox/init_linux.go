package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/containerd/errdefs"
)

// FindInit returns the host path of corral-init: $CORRAL_INIT, else
// corral-init next to the running executable, else the libexec
// directories. "" when none exists.
func FindInit() string {
	var candidates []string
	if p := os.Getenv("CORRAL_INIT"); p != "" {
		candidates = append(candidates, p)
	}
	if exe, err := os.Executable(); err == nil {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "corral-init"))
	}
	candidates = append(candidates, "/usr/local/libexec/corral/corral-init", "/usr/libexec/corral/corral-init")
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
			return c
		}
	}
	return ""
}

// initBinary returns the host path of the corral-init every container of
// this executor binds read-only at initctl.InitPath: a content-addressed
// copy, StateDir/bin/corral-init-<sha256>, written once (by whichever
// corral process gets there first, atomically) and checked against its
// name every time an executor first needs it. Rebuilding corral-init on
// the host changes neither a running container nor any image. It fails
// with errdefs.ErrNotFound when no corral-init is found (FindInit).
func (e *Executor) initBinary() (string, error) {
	e.initOnce.Lock()
	defer e.initOnce.Unlock()
	if e.init != "" {
		return e.init, nil
	}
	src := FindInit()
	if src == "" {
		return "", fmt.Errorf("%w: corral-init: not next to corral, in /usr/local/libexec/corral or /usr/libexec/corral, nor named by $CORRAL_INIT; build it with `make build` (CGO_ENABLED=0 go build ./cmd/corral-init)", errdefs.ErrNotFound)
	}
	p, err := installInit(src, filepath.Join(e.cfg.StateDir, "bin"))
	if err != nil {
		return "", fmt.Errorf("installing corral-init from %s: %w", src, err)
	}
	e.init = p
	return p, nil
}

// installInit copies src to dir/corral-init-<sha256 of src> (0555) unless
// a copy with that content is there already, and returns its path. A copy
// whose content does not match its name is replaced.
func installInit(src, dir string) (string, error) {
	data, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	name := "corral-init-" + hex.EncodeToString(sum[:])
	dst := filepath.Join(dir, name)
	if got, err := fileSHA256(dst); err == nil && got == hex.EncodeToString(sum[:]) {
		return dst, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	return dst, nil
}
