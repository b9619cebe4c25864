package fsop

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// FS runs the file operations beneath one root directory (the view's
// mount point in the container; any directory in tests), through
// internal/rootfs: reads resolve under rootfs.Beneath (the repository's
// own relative symlinks are followed, never out of the root; the host
// resolved and judged them first), writes under rootfs.NoSymlinks (no
// link is ever written through).
type FS struct {
	root *rootfs.Dir
}

// Open opens the root. The caller must call Close.
func Open(root string) (*FS, error) {
	d, err := rootfs.OpenRoot(root)
	if err != nil {
		return nil, errorf(CodeIO, "opening %s: %v", root, err)
	}
	return &FS{root: d}, nil
}

// Close closes the root.
func (f *FS) Close() error { return f.root.Close() }

// checkPath refuses what the host never sends: a non-canonical path.
func checkPath(p string) *Error {
	if p == "" || p == "." {
		return nil
	}
	if strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return errorf(CodeInvalid, "%q is not a relative path", p)
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return errorf(CodeInvalid, "%q is not a canonical path", p)
		}
	}
	return nil
}

// sysError names what the kernel said about p.
func sysError(p string, err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return errorf(CodeNotFound, "%s: no such file or directory", p)
	case errors.Is(err, unix.ENOTDIR):
		return errorf(CodeNotDir, "%s: a component is not a directory", p)
	case errors.Is(err, unix.EISDIR):
		return errorf(CodeIsDir, "%s: is a directory", p)
	case errors.Is(err, unix.ELOOP):
		return errorf(CodeSymlink, "%s: is or passes through a symbolic link; file tools do not write through links", p)
	case errors.Is(err, unix.EXDEV):
		return errorf(CodeEscapes, "%s: resolves outside the repository", p)
	case errors.Is(err, unix.EROFS):
		return errorf(CodeReadOnly, "%s: read-only file system (not in the session's writable mount)", p)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return errorf(CodePermission, "%s: permission denied", p)
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return errorf(CodeNoSpace, "%s: the session's write area is full", p)
	case errors.Is(err, unix.EFBIG):
		return errorf(CodeTooLarge, "%s: file too large", p)
	}
	return errorf(CodeIO, "%s: %v", p, err)
}

// openDir opens the directory p ("" or "." for the root) for reading.
func (f *FS) openDir(p string) (*rootfs.Dir, error) {
	if p == "" {
		p = "."
	}
	d, err := f.root.OpenDir(p, rootfs.Beneath)
	if err != nil {
		return nil, sysError(p, err)
	}
	return d, nil
}

// parentDir opens the directory that holds p, never through a symbolic
// link; with create, missing directories are made (0755). It returns the
// directory and p's last component.
func (f *FS) parentDir(p string, create bool) (*rootfs.Dir, string, error) {
	dir, name := path.Split(p)
	dir = strings.TrimSuffix(dir, "/")
	var d *rootfs.Dir
	var err error
	if create {
		d, err = f.root.MkdirAll(dir, 0o755)
	} else {
		d, err = f.root.OpenDir(dir, rootfs.NoSymlinks)
	}
	if err != nil {
		var pe *os.PathError
		if create && errors.As(err, &pe) {
			switch {
			case errors.Is(err, unix.ELOOP):
				return nil, "", errorf(CodeSymlink, "%s: %s is a symbolic link; file tools do not write through links", p, pe.Path)
			case errors.Is(err, unix.ENOTDIR):
				return nil, "", errorf(CodeNotDir, "%s: %s is not a directory", p, pe.Path)
			}
		}
		return nil, "", sysError(p, err)
	}
	return d, name, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// looksBinary reports a NUL byte or invalid UTF-8 in a prefix of a file
// (an incomplete sequence at the very end of the prefix is allowed).
func looksBinary(b []byte, whole bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	if !whole {
		b = trimIncomplete(b)
	}
	return !utf8.Valid(b)
}

// trimIncomplete drops an incomplete UTF-8 sequence at the end of b.
func trimIncomplete(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return b
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

// Read returns a window of the file p.
func (f *FS) Read(p string, o ReadOptions) (*ReadResult, error) {
	if e := checkPath(p); e != nil {
		return nil, e
	}
	if p == "" {
		p = "."
	}
	file, st, err := f.root.OpenFile(p, rootfs.Beneath)
	switch {
	case errors.Is(err, rootfs.ErrNotRegular) && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil, errorf(CodeIsDir, "%s: is a directory (use list)", p)
	case errors.Is(err, rootfs.ErrNotRegular):
		return nil, errorf(CodeNotFile, "%s: not a regular file", p)
	case err != nil:
		return nil, sysError(p, err)
	}
	defer file.Close()
	size := st.Size
	res := &ReadResult{Path: p, Size: size, Unit: "lines"}
	if o.Bytes {
		res.Unit = "bytes"
	}
	if size <= MaxHashBytes {
		h := sha256.New()
		if _, err := io.Copy(h, io.NewSectionReader(file, 0, size)); err != nil {
			return nil, sysError(p, err)
		}
		res.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	head := make([]byte, min(size, sniffBytes))
	if _, err := io.ReadFull(io.NewSectionReader(file, 0, size), head); err != nil {
		return nil, sysError(p, err)
	}
	if looksBinary(head, int64(len(head)) == size) {
		res.Binary = true
		return res, nil
	}
	offset := max(o.Offset, 0)
	var content []byte
	if o.Bytes {
		limit := o.Limit
		if limit <= 0 || limit > MaxReadBytes {
			limit = MaxReadBytes
		}
		offset = min(offset, size)
		buf := make([]byte, min(limit+utf8.UTFMax, size-offset))
		n, err := file.ReadAt(buf, offset)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, sysError(p, err)
		}
		buf = buf[:n]
		// Start and end on character boundaries.
		skip := 0
		for skip < len(buf) && skip < utf8.UTFMax && !utf8.RuneStart(buf[skip]) {
			skip++
		}
		offset += int64(skip)
		buf = buf[skip:]
		if int64(len(buf)) > limit {
			buf = trimIncomplete(buf[:limit])
		}
		content = buf
		res.Offset, res.Count = offset, int64(len(content))
		res.NextOffset = offset + res.Count
		res.EOF = res.NextOffset >= size
		res.Truncated = o.Limit > MaxReadBytes && !res.EOF
	} else {
		limit := o.Limit
		if limit <= 0 {
			limit = DefaultReadLines
		}
		var err error
		content, err = readLines(file, size, offset, limit, res)
		if err != nil {
			return nil, sysError(p, err)
		}
	}
	if looksBinary(content, true) {
		res.Binary, res.Count = true, 0
		return res, nil
	}
	res.Content = string(content)
	fitRead(res, o.MaxOutput)
	return res, nil
}

// readLines skips offset lines and returns up to limit lines, at most
// MaxReadBytes in all; a first line longer than that is cut (and the
// next offset skips the rest of it).
func readLines(file *os.File, size, offset, limit int64, res *ReadResult) ([]byte, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(file, 0, size), 64<<10)
	res.Offset = 0
	eof := false
	for res.Offset < offset {
		_, _, err := nextLine(r, 0)
		if errors.Is(err, io.EOF) {
			eof = true
			break
		}
		if err != nil {
			return nil, err
		}
		res.Offset++
	}
	var out []byte
	var count int64
	for !eof && count < limit {
		line, cut, err := nextLine(r, MaxReadBytes-len(out))
		if errors.Is(err, io.EOF) {
			eof = true
			break
		}
		if err != nil {
			return nil, err
		}
		if cut {
			res.Truncated = true
			if count > 0 {
				// It does not fit: stop before it.
				break
			}
			out = append(out, trimIncomplete(line)...)
			count++
			break
		}
		out = append(out, line...)
		count++
	}
	if !eof {
		if _, err := r.Peek(1); errors.Is(err, io.EOF) {
			eof = true
		}
	}
	res.Count = count
	res.NextOffset = res.Offset + count
	res.EOF = eof
	return out, nil
}

// nextLine reads one line, its newline included, keeping at most keep
// bytes of it; cut says some were dropped. It returns io.EOF only when no
// line is left.
func nextLine(r *bufio.Reader, keep int) (kept []byte, cut bool, err error) {
	read := false
	for {
		frag, err := r.ReadSlice('\n')
		if len(frag) > 0 {
			read = true
		}
		if room := keep - len(kept); len(frag) <= room {
			kept = append(kept, frag...)
		} else {
			kept = append(kept, frag[:max(room, 0)]...)
			cut = true
		}
		switch {
		case err == nil:
			return kept, cut, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			if !read {
				return nil, false, io.EOF
			}
			return kept, cut, nil
		default:
			return nil, false, err
		}
	}
}

// fitRead shrinks the content until the encoded response fits max bytes
// (0: no bound), on line or character boundaries.
func fitRead(res *ReadResult, max int) {
	for max > 0 && encodedLen(res) > max && res.Content != "" {
		c := res.Content[:len(res.Content)/2]
		if res.Unit == "lines" {
			i := strings.LastIndexByte(c, '\n')
			c = c[:i+1]
			res.Count = int64(strings.Count(c, "\n"))
		} else {
			c = string(trimIncomplete([]byte(c)))
			res.Count = int64(len(c))
		}
		res.Content = c
		res.NextOffset = res.Offset + res.Count
		res.EOF = false
		res.Truncated = true
	}
}

func encodedLen(v any) int {
	b, _ := json.Marshal(v)
	return len(b) + 16
}

func typeName(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

func joinPath(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

// List returns the entries of the directory p, sorted by name, at most
// max (0: MaxEntries).
func (f *FS) List(p string, max int) (*ListResult, error) {
	if e := checkPath(p); e != nil {
		return nil, e
	}
	if max <= 0 || max > MaxEntries {
		max = MaxEntries
	}
	dir, err := f.openDir(p)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(0)
	if err != nil {
		return nil, sysError(p, err)
	}
	res := &ListResult{Path: p, Entries: []Entry{}}
	if p == "" {
		res.Path = "."
	}
	for _, e := range entries {
		n := e.Name()
		if len(res.Entries) == max {
			res.Truncated = true
			break
		}
		st, err := dir.Lstat(n, rootfs.NoSymlinks)
		if err != nil {
			continue
		}
		e := Entry{Path: joinPath(p, n), Type: typeName(fileMode(st.Mode))}
		if e.Type == "file" {
			e.Size = st.Size
		}
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}

func fileMode(m uint32) os.FileMode {
	switch m & unix.S_IFMT {
	case unix.S_IFREG:
		return 0
	case unix.S_IFDIR:
		return os.ModeDir
	case unix.S_IFLNK:
		return os.ModeSymlink
	}
	return os.ModeDevice
}

// scanner counts the directory entries a glob or search visits against
// MaxScan.
type scanner struct {
	scanned int
	full    bool
}

// readDir lists the directory d, sorted by name, at most what MaxScan
// still allows.
func (w *scanner) readDir(d *rootfs.Dir) ([]fs.DirEntry, error) {
	entries, err := d.ReadDir(0)
	if err != nil {
		return nil, err
	}
	if w.scanned+len(entries) > MaxScan {
		entries = entries[:max(MaxScan-w.scanned, 0)]
		w.full = true
	}
	w.scanned += len(entries)
	return entries, nil
}

// count counts one entry; false once MaxScan is passed.
func (w *scanner) count() bool {
	if w.scanned >= MaxScan {
		w.full = true
		return false
	}
	w.scanned++
	return true
}

// Glob returns the entries matching pattern (see the syntax in glob.go),
// at most max (0: DefaultMatches).
func (f *FS) Glob(pattern string, max int) (*GlobResult, error) {
	if r := CheckGlobSyntax(pattern); r != "" {
		return nil, errorf(CodeInvalid, "%s", r)
	}
	if max <= 0 {
		max = DefaultMatches
	}
	max = min(max, MaxMatches)
	comps, literal := SplitGlob(pattern)
	res := &GlobResult{Pattern: pattern, Matches: []Entry{}}
	if literal == len(comps) {
		if st, err := f.root.Lstat(pattern, rootfs.Beneath); err == nil {
			res.Matches = append(res.Matches, Entry{Path: pattern, Type: typeName(fileMode(st.Mode))})
		}
		return res, nil
	}
	start := strings.Join(comps[:literal], "/")
	dir, err := f.openDir(start)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && (e.Code == CodeNotFound || e.Code == CodeNotDir) {
			return res, nil
		}
		return nil, err
	}
	defer dir.Close()
	g := &globber{seen: map[string]bool{}, max: max}
	g.walk(dir, start, comps[literal:])
	sort.Slice(g.out, func(i, j int) bool { return g.out[i].Path < g.out[j].Path })
	res.Matches = append(res.Matches, g.out...)
	res.Truncated = g.truncated || g.w.full
	return res, nil
}

type globber struct {
	w         scanner
	seen      map[string]bool
	out       []Entry
	max       int
	truncated bool
}

func (g *globber) add(p string, e fs.DirEntry) {
	if g.seen[p] {
		return
	}
	if len(g.out) == g.max {
		g.truncated = true
		return
	}
	g.seen[p] = true
	g.out = append(g.out, Entry{Path: p, Type: typeName(e.Type())})
}

func (g *globber) done() bool { return g.truncated || g.w.full }

// walk matches rest against the directory d (path rel).
func (g *globber) walk(d *rootfs.Dir, rel string, rest []string) {
	if g.done() || len(rest) == 0 {
		return
	}
	entries, err := g.w.readDir(d)
	if err != nil {
		return
	}
	c := rest[0]
	if c == "**" {
		// Zero directories.
		if len(rest) > 1 {
			g.walk(d, rel, rest[1:])
		}
		for _, e := range entries {
			if g.done() {
				return
			}
			p := joinPath(rel, e.Name())
			if len(rest) == 1 {
				g.add(p, e)
			}
			if e.IsDir() {
				g.sub(d, e.Name(), p, rest)
			}
		}
		return
	}
	for _, e := range entries {
		if g.done() {
			return
		}
		if ok, _ := path.Match(c, e.Name()); !ok {
			continue
		}
		p := joinPath(rel, e.Name())
		if len(rest) == 1 {
			g.add(p, e)
		} else if e.IsDir() {
			g.sub(d, e.Name(), p, rest[1:])
		}
	}
}

func (g *globber) sub(d *rootfs.Dir, name, rel string, rest []string) {
	sub, err := d.Sub(name)
	if err != nil {
		return
	}
	defer sub.Close()
	g.walk(sub, rel, rest)
}

// Search returns the lines matching the regular expression expr (Go RE2
// syntax) in the file p or the files below the directory p.
func (f *FS) Search(expr, p string, o SearchOptions) (*SearchResult, error) {
	if e := checkPath(p); e != nil {
		return nil, e
	}
	if len(expr) > MaxPatternBytes {
		return nil, errorf(CodeTooLarge, "regular expression longer than %d bytes", MaxPatternBytes)
	}
	if o.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, errorf(CodeInvalid, "regular expression: %v", err)
	}
	if o.Include != "" {
		if _, err := path.Match(o.Include, ""); err != nil || strings.Contains(o.Include, "/") {
			return nil, errorf(CodeInvalid, "include glob %q: want a base-name pattern such as *.go", o.Include)
		}
	}
	max := o.MaxResults
	if max <= 0 {
		max = DefaultMatches
	}
	max = min(max, MaxMatches)
	res := &SearchResult{Pattern: expr, Path: p, Matches: []Match{}}
	if res.Path == "" {
		res.Path = "."
	}
	s := &searcher{re: re, include: o.Include, max: max, budget: o.MaxOutput * 3 / 4, res: res}
	file, st, err := f.root.OpenFile(res.Path, rootfs.Beneath)
	switch {
	case err == nil:
		defer file.Close()
		s.file(file, p)
	case errors.Is(err, rootfs.ErrNotRegular) && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		top, err := f.openDir(p)
		if err != nil {
			return nil, err
		}
		defer top.Close()
		if err := rootfs.Walk(top, rootfs.Visitor{Entry: s.entry}); err != nil {
			return nil, sysError(p, err)
		}
	case errors.Is(err, rootfs.ErrNotRegular):
		return nil, errorf(CodeNotFile, "%s: not a regular file or directory", p)
	default:
		return nil, sysError(p, err)
	}
	res.Truncated = res.Truncated || s.w.full
	return res, nil
}

type searcher struct {
	w       scanner
	re      *regexp.Regexp
	include string
	max     int
	budget  int
	used    int
	res     *SearchResult
}

func (s *searcher) done() bool { return s.res.Truncated || s.w.full }

// entry searches the entry e of the directory d (rootfs.Walk: directories
// are entered, never through a link; links are skipped).
func (s *searcher) entry(d *rootfs.Dir, e fs.DirEntry) error {
	if s.done() || !s.w.count() {
		return rootfs.SkipAll
	}
	if e.IsDir() || !e.Type().IsRegular() {
		return nil
	}
	if s.include != "" {
		if ok, _ := path.Match(s.include, e.Name()); !ok {
			return nil
		}
	}
	file, _, err := d.OpenRegular(e.Name(), nil)
	if err != nil {
		return nil
	}
	defer file.Close()
	s.file(file, d.Join(e.Name()))
	if s.done() {
		return rootfs.SkipAll
	}
	return nil
}

func (s *searcher) file(file *os.File, p string) {
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	if st.Size() > MaxSearchFileBytes {
		s.res.SkippedLarge++
		return
	}
	data, err := rootfs.ReadAtMost(file, st.Size(), MaxSearchFileBytes)
	if err != nil || int64(len(data)) > MaxSearchFileBytes {
		return
	}
	s.res.FilesSearched++
	if looksBinary(data, true) {
		s.res.SkippedBinary++
		return
	}
	line := 0
	for len(data) > 0 {
		line++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		if !s.re.Match(l) {
			continue
		}
		if len(s.res.Matches) == s.max || (s.budget > 0 && s.used > s.budget) {
			s.res.Truncated = true
			return
		}
		text := strings.TrimSuffix(string(l), "\r")
		if len(text) > MaxMatchText {
			text = string(trimIncomplete([]byte(text[:MaxMatchText]))) + "…"
		}
		s.used += len(p) + len(text)*2 + 40
		s.res.Matches = append(s.res.Matches, Match{Path: p, Line: line, Text: text})
	}
}

// readStaged reads a file the host staged, at most limit bytes.
func readStaged(name string, limit int64) ([]byte, error) {
	file, err := os.Open(name)
	if err != nil {
		return nil, errorf(CodeIO, "reading staged input: %v", err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, errorf(CodeIO, "reading staged input: %v", err)
	}
	if int64(len(data)) > limit {
		return nil, errorf(CodeTooLarge, "content larger than %d bytes", limit)
	}
	return data, nil
}

// Write replaces (or creates) the file p with content. When expected is
// set, the file must exist with that sha256 (else CodeConflict). Missing
// parent directories are created; no symbolic link is followed.
func (f *FS) Write(p string, content []byte, expected string) (*WriteResult, error) {
	if e := checkPath(p); e != nil || p == "" || p == "." {
		return nil, errorf(CodeInvalid, "%q is not a file path", p)
	}
	if len(content) > MaxWriteBytes {
		return nil, errorf(CodeTooLarge, "content larger than %d bytes", MaxWriteBytes)
	}
	dir, name, err := f.parentDir(p, true)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	res := &WriteResult{Path: p}
	switch st, err := dir.Lstat(name, rootfs.NoSymlinks); {
	case errors.Is(err, unix.ENOENT):
		res.Created = true
	case err != nil:
		return nil, sysError(p, err)
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, errorf(CodeSymlink, "%s: is a symbolic link; file tools do not write through links", p)
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return nil, errorf(CodeIsDir, "%s: is a directory", p)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, errorf(CodeNotFile, "%s: not a regular file", p)
	}
	if !res.Created {
		old, err := readAt(dir, name, p)
		if err != nil {
			return nil, err
		}
		res.PreviousSHA256 = sha256Hex(old)
	}
	if expected != "" && expected != res.PreviousSHA256 {
		if res.Created {
			return nil, errorf(CodeConflict, "%s: stale revision: the file does not exist (expected sha256 %s)", p, expected)
		}
		return nil, errorf(CodeConflict, "%s: stale revision: its sha256 is %s, not %s; read it again", p, res.PreviousSHA256, expected)
	}
	out, err := dir.OpenEntry(name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, 0o644)
	if err != nil {
		return nil, sysError(p, err)
	}
	if _, err := out.Write(content); err != nil {
		out.Close()
		return nil, sysError(p, err)
	}
	if err := out.Close(); err != nil {
		return nil, sysError(p, err)
	}
	res.Size, res.SHA256 = int64(len(content)), sha256Hex(content)
	return res, nil
}

// readAt reads the regular file name in dir, not following a link, at
// most MaxWriteBytes.
func readAt(dir *rootfs.Dir, name, p string) ([]byte, error) {
	file, st, err := dir.OpenRegular(name, nil)
	if errors.Is(err, rootfs.ErrNotRegular) {
		return nil, errorf(CodeNotFile, "%s: not a regular file", p)
	}
	if err != nil {
		return nil, sysError(p, err)
	}
	defer file.Close()
	if st.Size > MaxWriteBytes {
		return nil, errorf(CodeTooLarge, "%s: larger than %d bytes", p, MaxWriteBytes)
	}
	data, err := rootfs.ReadAtMost(file, st.Size, MaxWriteBytes)
	if err != nil {
		return nil, sysError(p, err)
	}
	return data, nil
}

// Edit replaces old by new in the file p, whose current sha256 must be
// expected (else CodeConflict). old must occur exactly once, or at least
// once with all (then every occurrence is replaced).
func (f *FS) Edit(p string, old, new []byte, expected string, all bool) (*WriteResult, error) {
	if e := checkPath(p); e != nil || p == "" || p == "." {
		return nil, errorf(CodeInvalid, "%q is not a file path", p)
	}
	if len(old) == 0 {
		return nil, errorf(CodeInvalid, "the old text is empty")
	}
	if expected == "" {
		return nil, errorf(CodeInvalid, "the expected sha256 of the current content is required (read the file first)")
	}
	dir, name, err := f.parentDir(p, false)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	st, err := dir.Lstat(name, rootfs.NoSymlinks)
	if err != nil {
		return nil, sysError(p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, errorf(CodeSymlink, "%s: is a symbolic link; file tools do not write through links", p)
	}
	data, err := readAt(dir, name, p)
	if err != nil {
		return nil, err
	}
	cur := sha256Hex(data)
	if cur != expected {
		return nil, errorf(CodeConflict, "%s: stale revision: its sha256 is %s, not %s; read it again", p, cur, expected)
	}
	if looksBinary(data, true) {
		return nil, errorf(CodeBinary, "%s: binary file", p)
	}
	n := bytes.Count(data, old)
	switch {
	case n == 0:
		return nil, errorf(CodeNoMatch, "%s: the old text does not occur in the file", p)
	case n > 1 && !all:
		return nil, errorf(CodeAmbiguous, "%s: the old text occurs %d times; give more context to make it unique", p, n)
	}
	out := bytes.Replace(data, old, new, -1)
	if len(out) > MaxWriteBytes {
		return nil, errorf(CodeTooLarge, "%s: the result is larger than %d bytes", p, MaxWriteBytes)
	}
	file, err := dir.OpenEntry(name, unix.O_WRONLY|unix.O_TRUNC, 0)
	if err != nil {
		return nil, sysError(p, err)
	}
	if _, err := file.Write(out); err != nil {
		file.Close()
		return nil, sysError(p, err)
	}
	if err := file.Close(); err != nil {
		return nil, sysError(p, err)
	}
	return &WriteResult{Path: p, Size: int64(len(out)), SHA256: sha256Hex(out), PreviousSHA256: cur, Replacements: n}, nil
}
