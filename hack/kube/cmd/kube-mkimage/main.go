// Command kube-mkimage writes a one-layer OCI image archive (an OCI image
// layout in a tar, image-spec image-layout.md) from files and directories of
// the host, for a cluster without a registry:
//
//	kube-mkimage -name corral.local/kube/pause:1 -o pause.tar \
//	    [-entrypoint /kube-pause] [-cmd a,b] [-user 65535:65535] [-env K=V]... \
//	    SRC[=DEST]...
//
// SRC is a file (placed at DEST, default /basename) or a directory (its
// contents placed under DEST, default /). Symbolic links are kept as links;
// other special files are refused. Every entry is owned by 0:0 with mtime 0,
// so the same inputs give the same image ID.
//
// The index names the image in the io.containerd.image.name annotation,
// which `ctr images import` uses as the image name, and its tag in
// org.opencontainers.image.ref.name.
package main

import (
	"archive/tar"
	"bytes"
	_ "crypto/sha256" // go-digest finds its hash through crypto.SHA256
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	name := flag.String("name", "", "image name with tag, e.g. corral.local/kube/pause:1 (required)")
	out := flag.String("o", "", "output archive (required; - for stdout)")
	entrypoint := flag.String("entrypoint", "", "comma-separated entrypoint")
	cmd := flag.String("cmd", "", "comma-separated default arguments")
	user := flag.String("user", "", "user[:group] the image runs as")
	var env listFlag
	flag.Var(&env, "env", "K=V environment entry (repeatable); PATH has a default")
	flag.Parse()
	if *name == "" || *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	cfg := ocispec.ImageConfig{
		Entrypoint: split(*entrypoint),
		Cmd:        split(*cmd),
		User:       *user,
		Env:        append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...),
		WorkingDir: "/",
	}
	archive, err := build(*name, cfg, flag.Args())
	if err != nil {
		log.Fatal(err)
	}
	if *out == "-" {
		_, err = os.Stdout.Write(archive)
	} else {
		err = os.WriteFile(*out, archive, 0o644)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// entry is one file of the layer: src on the host (empty for a directory
// made only as a parent) at the clean absolute path dst.
type entry struct {
	src string
	dst string
}

func build(name string, cfg ocispec.ImageConfig, srcs []string) ([]byte, error) {
	files := map[string]entry{}
	for _, arg := range srcs {
		src, dst, _ := strings.Cut(arg, "=")
		fi, err := os.Lstat(src)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			if dst == "" {
				dst = "/" + filepath.Base(src)
			}
			files[path.Clean("/"+dst)] = entry{src, path.Clean("/" + dst)}
			continue
		}
		if dst == "" {
			dst = "/"
		}
		err = filepath.WalkDir(src, func(p string, _ fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return err
			}
			d := path.Clean("/" + dst + "/" + filepath.ToSlash(rel))
			files[d] = entry{p, d}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	for d := range files { // parents of every entry
		for p := path.Dir(d); p != "/"; p = path.Dir(p) {
			if _, ok := files[p]; !ok {
				files[p] = entry{dst: p}
			}
		}
	}
	delete(files, "/")
	names := make([]string, 0, len(files))
	for d := range files {
		names = append(names, d)
	}
	sort.Strings(names)

	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, d := range names {
		if err := addFile(tw, files[d]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerDesc := descriptor(ocispec.MediaTypeImageLayer, layer.Bytes())

	img := ocispec.Image{
		Platform: ocispec.Platform{Architecture: runtime.GOARCH, OS: "linux"},
		Config:   cfg,
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{layerDesc.Digest}},
	}
	imgJSON, err := json.Marshal(img)
	if err != nil {
		return nil, err
	}
	cfgDesc := descriptor(ocispec.MediaTypeImageConfig, imgJSON)
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config:    cfgDesc,
		Layers:    []ocispec.Descriptor{layerDesc},
	})
	if err != nil {
		return nil, err
	}
	manDesc := descriptor(ocispec.MediaTypeImageManifest, manifest)
	manDesc.Platform = &img.Platform
	tag := "latest"
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		tag = name[i+1:]
	}
	manDesc.Annotations = map[string]string{
		"io.containerd.image.name": name,
		ocispec.AnnotationRefName:  tag,
	}
	index, err := json.Marshal(ocispec.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageIndex,
		Manifests: []ocispec.Descriptor{manDesc},
	})
	if err != nil {
		return nil, err
	}
	layout, err := json.Marshal(ocispec.ImageLayout{Version: ocispec.ImageLayoutVersion})
	if err != nil {
		return nil, err
	}

	var out bytes.Buffer
	ow := tar.NewWriter(&out)
	put := func(n string, b []byte) error {
		if err := ow.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := ow.Write(b)
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{ocispec.ImageLayoutFile, layout},
		{"index.json", index},
		{blob(layerDesc), layer.Bytes()},
		{blob(cfgDesc), imgJSON},
		{blob(manDesc), manifest},
	} {
		if err := put(f.name, f.data); err != nil {
			return nil, err
		}
	}
	if err := ow.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func descriptor(mediaType string, b []byte) ocispec.Descriptor {
	return ocispec.Descriptor{MediaType: mediaType, Digest: digest.FromBytes(b), Size: int64(len(b))}
}

func blob(d ocispec.Descriptor) string {
	return "blobs/" + d.Digest.Algorithm().String() + "/" + d.Digest.Encoded()
}

func addFile(tw *tar.Writer, e entry) error {
	hdr := &tar.Header{Name: strings.TrimPrefix(e.dst, "/"), ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
	if e.src == "" {
		hdr.Typeflag, hdr.Mode, hdr.Name = tar.TypeDir, 0o755, hdr.Name+"/"
		return tw.WriteHeader(hdr)
	}
	fi, err := os.Lstat(e.src)
	if err != nil {
		return err
	}
	hdr.Mode = int64(fi.Mode().Perm())
	switch {
	case fi.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		return tw.WriteHeader(hdr)
	case fi.Mode()&fs.ModeSymlink != 0:
		if hdr.Linkname, err = os.Readlink(e.src); err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		return tw.WriteHeader(hdr)
	case fi.Mode().IsRegular():
		hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	default:
		return fmt.Errorf("%s: not a file, directory or symlink", e.src)
	}
}
