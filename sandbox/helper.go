package sandbox

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// helperPath is where an image holds corral's own binary, which runs the
// file tools inside the container as `corral fs ...` (see sandbox/fsop).
// argv[0] is the bare name "corral", resolved in the image's PATH.
const (
	helperPath = "/usr/bin/corral"
	helperName = "corral"
)

// labelHelper identifies the helper in an image (see helperID), so that a
// corral whose binary changed rebuilds its default image.
const labelHelper = LabelPrefix + "helper"

// FindHelper returns the host path of the binary to put in the image as
// the file tools' helper: $CORRAL_HELPER, else the running executable when
// it is corral. "" when neither: the image then has no helper, and the
// file tools fail with a message saying so.
func FindHelper() string {
	if p := os.Getenv("CORRAL_HELPER"); p != "" {
		return p
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if !strings.HasPrefix(filepath.Base(exe), "corral") || strings.HasSuffix(filepath.Base(exe), ".test") {
		return ""
	}
	return exe
}

// helperID identifies a helper binary cheaply: the digest of its Go build
// id note, or of the whole file when it has none.
func helperID(p string) (string, error) {
	if f, err := elf.Open(p); err == nil {
		defer f.Close()
		if sec := f.Section(".note.go.buildid"); sec != nil {
			if data, err := sec.Data(); err == nil && len(data) > 0 {
				sum := sha256.Sum256(data)
				return "go-buildid-" + hex.EncodeToString(sum[:]), nil
			}
		}
	}
	return fileSHA256(p)
}

// staleHelper reports whether the image's helper differs from the one this
// corral would put there.
func staleHelper(labels map[string]string) bool {
	p := FindHelper()
	if p == "" {
		return false
	}
	id, err := helperID(p)
	return err == nil && labels[labelHelper] != id
}
