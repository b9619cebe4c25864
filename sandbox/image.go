package sandbox

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	containerd "github.com/containerd/containerd/v2/client"
	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/mounts"
	"github.com/opencontainers/go-digest"
	specsimage "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// DefaultImageRef names the tools image that `corral image build` assembles
// from this machine's own binaries.
const DefaultImageRef = "localhost/corral/tools:default"

// ImagePath is the PATH inside the tools image; argv[0] is resolved only
// against it (never against the repository, which is mounted noexec).
const ImagePath = "/usr/bin:/bin"

// hostPath is where the image builder looks for the tools on the host.
const hostPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ImageSpec says what a locally built tools image holds.
type ImageSpec struct {
	// Ref is the image name in containerd, e.g. DefaultImageRef.
	Ref string
	// Tools are command names, looked up on the host's PATH and copied to
	// /usr/bin/<name> with the shared libraries their ELF headers need.
	Tools []string
	// Optional tools are copied when the host has them and skipped
	// silently otherwise.
	Optional []string
	// Files maps an absolute path inside the image to a host file to copy
	// there (mode kept). Used for data such as file(1)'s magic database,
	// and by tests for a static probe binary.
	Files map[string]string
	// Dirs are extra directories (absolute in-image paths, mode 0755),
	// e.g. mount points.
	Dirs []string
}

// BuildResult reports what BuildImage did.
type BuildResult struct {
	Ref string `json:"ref"`
	// LayerDigest is the sha256 of the uncompressed layer.
	LayerDigest string `json:"layer_digest"`
	// Built is false when an identical image was already present.
	Built bool `json:"built"`
	// Tools lists the commands the image holds.
	Tools []string `json:"tools"`
	// Bytes is the layer's size.
	Bytes int64 `json:"bytes"`
}

const labelLayer = LabelPrefix + "layer"

// DefaultImageSpec is what `corral image build` puts in the default tools
// image: every command of the built-in grammars that the host has.
// corral-init is not in any image: it is bound into each container from
// the host (see initctl).
func DefaultImageSpec() ImageSpec {
	return ImageSpec{
		Ref: DefaultImageRef,
		Tools: []string{"ls", "cat", "echo", "head", "tail", "wc", "grep", "find", "sort", "uniq", "cut", "tr",
			"diff", "stat", "sed", "cp", "mv", "mkdir", "touch", "rm"},
		Optional: []string{"rg", "file", "git"},
		Files:    map[string]string{},
	}
}

// BuildImage assembles a rootfs from host binaries as one deterministic
// layer (fixed mtimes, root ownership, sorted entries) and imports it into
// containerd as an OCI image, unpacked for the overlayfs snapshotter. It is
// idempotent: when an image of the same name already carries the same layer
// digest it does nothing and reports Built=false. A missing required tool
// is an errdefs.ErrNotFound error naming it.
func BuildImage(ctx context.Context, client *containerd.Client, spec ImageSpec) (*BuildResult, error) {
	layer, tools, err := buildLayer(spec)
	if err != nil {
		return nil, err
	}
	layerDigest := digest.FromBytes(layer)
	res := &BuildResult{Ref: spec.Ref, LayerDigest: layerDigest.String(), Tools: tools, Bytes: int64(len(layer))}

	if img, err := client.ImageService().Get(ctx, spec.Ref); err == nil {
		if img.Labels[labelLayer] == layerDigest.String() {
			if err := ensureUnpacked(ctx, client, spec.Ref); err != nil {
				return nil, err
			}
			return res, nil
		}
	} else if !errdefs.IsNotFound(err) {
		return nil, fmt.Errorf("looking up image %q: %w", spec.Ref, err)
	}

	archive, err := ociArchive(spec.Ref, layer, layerDigest)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{labelLayer: layerDigest.String(), LabelOwner: "corral"}
	imgs, err := client.Import(ctx, bytes.NewReader(archive), containerd.WithImageLabels(labels))
	if err != nil {
		return nil, fmt.Errorf("importing image %q: %w", spec.Ref, err)
	}
	if len(imgs) == 0 {
		return nil, fmt.Errorf("importing image %q: the archive named no image", spec.Ref)
	}
	if err := ensureUnpacked(ctx, client, spec.Ref); err != nil {
		return nil, err
	}
	res.Built = true
	return res, nil
}

func ensureUnpacked(ctx context.Context, client *containerd.Client, ref string) error {
	img, err := client.GetImage(ctx, ref)
	if err != nil {
		return fmt.Errorf("getting image %q: %w", ref, err)
	}
	ok, err := img.IsUnpacked(ctx, snapshotter)
	if err != nil {
		return fmt.Errorf("checking image %q: %w", ref, err)
	}
	if ok {
		return nil
	}
	if err := img.Unpack(ctx, snapshotter); err != nil {
		return fmt.Errorf("unpacking image %q: %w", ref, err)
	}
	return nil
}

// layerEntry is one entry of the rootfs layer.
type layerEntry struct {
	typ    byte // tar.TypeDir, tar.TypeReg, tar.TypeSymlink
	mode   int64
	host   string // regular files: the host file to copy
	target string // symlinks
}

// rootfs collects the layer's entries by in-image path (no leading slash).
type rootfs map[string]layerEntry

func (r rootfs) dir(p string, mode int64) {
	for d := p; d != "." && d != "/" && d != ""; d = path.Dir(d) {
		if _, ok := r[d]; !ok {
			r[d] = layerEntry{typ: tar.TypeDir, mode: 0o755}
		}
	}
	r[p] = layerEntry{typ: tar.TypeDir, mode: mode}
}

func (r rootfs) file(p, host string, mode int64) {
	r.dir(path.Dir(p), 0o755)
	r[p] = layerEntry{typ: tar.TypeReg, mode: mode, host: host}
}

func (r rootfs) symlink(p, target string) {
	r.dir(path.Dir(p), 0o755)
	r[p] = layerEntry{typ: tar.TypeSymlink, mode: 0o777, target: target}
}

// usrMerged maps a host library path into the usr-merged image layout.
func usrMerged(p string) string {
	p = strings.TrimPrefix(p, "/")
	for _, top := range []string{"lib/", "lib64/", "bin/", "sbin/"} {
		if strings.HasPrefix(p, top) {
			return "usr/" + p
		}
	}
	return p
}

func buildLayer(spec ImageSpec) ([]byte, []string, error) {
	r := rootfs{}
	for _, d := range []string{"usr/bin", "usr/lib", "usr/lib64", "usr/sbin", "etc", "proc", "sys", "dev", "run", strings.TrimPrefix(mounts.ContainerRoot, "/")} {
		r.dir(d, 0o755)
	}
	r.dir("tmp", 0o1777)
	r.dir("root", 0o700)
	for _, l := range []string{"bin", "sbin", "lib", "lib64"} {
		r.symlink(l, "usr/"+l)
	}
	var tools []string
	add := func(name string, required bool) error {
		if strings.ContainsRune(name, '/') || name == "" {
			return fmt.Errorf("image tool %q: %w: a bare command name is required", name, errdefs.ErrInvalidArgument)
		}
		host, err := lookPath(name)
		if err != nil {
			if required {
				return fmt.Errorf("image tool %q: %w on this machine's PATH", name, errdefs.ErrNotFound)
			}
			return nil
		}
		if err := addELF(r, host, "usr/bin/"+name); err != nil {
			return fmt.Errorf("image tool %q (%s): %w", name, host, err)
		}
		tools = append(tools, name)
		return nil
	}
	for _, t := range spec.Tools {
		if err := add(t, true); err != nil {
			return nil, nil, err
		}
	}
	for _, t := range spec.Optional {
		if err := add(t, false); err != nil {
			return nil, nil, err
		}
	}
	for _, d := range spec.Dirs {
		r.dir(strings.TrimPrefix(d, "/"), 0o755)
	}
	for in, host := range spec.Files {
		st, err := os.Stat(host)
		if err != nil {
			return nil, nil, fmt.Errorf("image file %s: %w", in, err)
		}
		if err := addELF(r, host, strings.TrimPrefix(in, "/")); err != nil {
			// Not an ELF executable: copy it as data.
			r.file(strings.TrimPrefix(in, "/"), host, int64(st.Mode().Perm()))
		}
	}
	// file(1) needs its magic database.
	if _, ok := r["usr/bin/file"]; ok {
		if mgc, err := filepath.EvalSymlinks("/usr/share/misc/magic.mgc"); err == nil {
			r.file(strings.TrimPrefix(mgc, "/"), mgc, 0o644)
			if mgc != "/usr/share/misc/magic.mgc" {
				r.symlink("usr/share/misc/magic.mgc", mgc)
			}
		}
	}
	r["etc/passwd"] = layerEntry{typ: tar.TypeReg, mode: 0o644}
	r["etc/group"] = layerEntry{typ: tar.TypeReg, mode: 0o644}
	r["etc/nsswitch.conf"] = layerEntry{typ: tar.TypeReg, mode: 0o644}
	inline := map[string]string{
		"etc/passwd":        "root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
		"etc/group":         "root:x:0:\nnogroup:x:65534:\n",
		"etc/nsswitch.conf": "passwd: files\ngroup: files\n",
	}
	sort.Strings(tools)
	layer, err := writeLayer(r, inline)
	return layer, tools, err
}

func fileSHA256(p string) (string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	return digest.FromBytes(data).Encoded(), nil
}

func lookPath(name string) (string, error) {
	for _, dir := range filepath.SplitList(hostPath) {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return filepath.EvalSymlinks(p)
		}
	}
	return "", fs.ErrNotExist
}

var libDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// addELF copies the ELF file host to in-image path dst, with its program
// interpreter and the transitive closure of its DT_NEEDED libraries.
func addELF(r rootfs, host, dst string) error {
	f, err := elf.Open(host)
	if err != nil {
		return err
	}
	defer f.Close()
	r.file(dst, host, 0o755)
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				return err
			}
			interp := strings.TrimRight(string(b), "\x00")
			real, err := filepath.EvalSymlinks(interp)
			if err != nil {
				return fmt.Errorf("interpreter %s: %w", interp, err)
			}
			r.file(usrMerged(interp), real, 0o755)
		}
	}
	needed, err := f.ImportedLibraries()
	if err != nil {
		return err
	}
	for _, lib := range needed {
		in, real, err := findLib(lib)
		if err != nil {
			return err
		}
		if _, done := r[in]; done {
			continue
		}
		if err := addELF(r, real, in); err != nil {
			return fmt.Errorf("library %s: %w", lib, err)
		}
	}
	return nil
}

func findLib(name string) (inImage, host string, err error) {
	for _, d := range libDirs {
		p := filepath.Join(d, name)
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return usrMerged(p), real, nil
		}
	}
	return "", "", fmt.Errorf("shared library %s: %w", name, errdefs.ErrNotFound)
}

func writeLayer(r rootfs, inline map[string]string) ([]byte, error) {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := r[n]
		hdr := &tar.Header{Name: n, Mode: e.mode, Typeflag: e.typ, Format: tar.FormatPAX}
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeSymlink:
			hdr.Linkname = e.target
		case tar.TypeReg:
			var data []byte
			if s, ok := inline[n]; ok {
				data = []byte(s)
			} else {
				b, err := os.ReadFile(e.host)
				if err != nil {
					return nil, err
				}
				data = b
			}
			hdr.Size = int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ociArchive wraps one layer into an OCI image layout tar
// (image-spec image-layout.md) naming ref via the
// io.containerd.image.name annotation, which containerd's Import reads.
func ociArchive(ref string, layer []byte, layerDigest digest.Digest) ([]byte, error) {
	cfg := ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Config: ocispec.ImageConfig{
			Env:        []string{"PATH=" + ImagePath},
			User:       "65534:65534",
			WorkingDir: mounts.ContainerRoot,
		},
		RootFS: ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDigest}},
	}
	cfgBytes, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	manifest := ocispec.Manifest{
		Versioned: specsimage.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    ocispec.Descriptor{MediaType: ocispec.MediaTypeImageConfig, Digest: digest.FromBytes(cfgBytes), Size: int64(len(cfgBytes))},
		Layers:    []ocispec.Descriptor{{MediaType: ocispec.MediaTypeImageLayer, Digest: layerDigest, Size: int64(len(layer))}},
	}
	mBytes, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	index := ocispec.Index{
		Versioned: specsimage.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageManifest,
			Digest:    digest.FromBytes(mBytes),
			Size:      int64(len(mBytes)),
			Platform:  &ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH},
			Annotations: map[string]string{
				"io.containerd.image.name": ref,
				ocispec.AnnotationRefName:  ref,
			},
		}},
	}
	iBytes, err := json.Marshal(index)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	blob := func(b []byte) string { return fmt.Sprintf("blobs/sha256/%x", sha256.Sum256(b)) }
	for _, f := range []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", iBytes},
		{blob(mBytes), mBytes},
		{blob(cfgBytes), cfgBytes},
		{blob(layer), layer},
	} {
		if err := put(f.name, f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
