package fsop

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// FS runs the file operations beneath one root directory (Root in the
// container; any directory in tests).
type FS struct {
	root int
}

// Open opens the root. The caller must call Close.
func Open(root string) (*FS, error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errorf(CodeIO, "opening %s: %v", root, err)
	}
	return &FS{root: fd}, nil
}

// Close closes the root.
func (f *FS) Close() error { return unix.Close(f.root) }

// readResolve lets reads follow the repository's own relative symlinks,
// never out of the root (the host resolved and judged them first).
const readResolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

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

func (f *FS) openRead(p string, flags int) (*os.File, error) {
	if p == "" {
		p = "."
	}
	fd, err := unix.Openat2(f.root, p, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: readResolve})
	if err != nil {
		return nil, sysError(p, err)
	}
	return os.NewFile(uintptr(fd), p), nil
}

// parentDir opens the directory that holds p, component by component,
// never following a symbolic link; with create, missing directories are
// made (0755). It returns the directory and p's last component.
func (f *FS) parentDir(p string, create bool) (*os.File, string, error) {
	comps := strings.Split(p, "/")
	fd, err := unix.Dup(f.root)
	if err != nil {
		return nil, "", sysError(p, err)
	}
	for i, c := range comps[:len(comps)-1] {
		next, err := unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) && create {
			if err = unix.Mkdirat(fd, c, 0o755); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(fd, c, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(fd)
		if err != nil {
			sub := strings.Join(comps[:i+1], "/")
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				var st unix.Stat_t
				if unix.Fstatat(f.root, sub, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return nil, "", errorf(CodeSymlink, "%s: %s is a symbolic link; file tools do not write through links", p, sub)
				}
				return nil, "", errorf(CodeNotDir, "%s: %s is not a directory", p, sub)
			}
			return nil, "", sysError(sub, err)
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), path.Dir(p)), comps[len(comps)-1], nil
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
	file, err := f.openRead(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, sysError(p, err)
	}
	if st.IsDir() {
		return nil, errorf(CodeIsDir, "%s: is a directory (use list)", p)
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(CodeNotFile, "%s: not a regular file", p)
	}
	size := st.Size()
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
	dir, err := f.openRead(p, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, sysError(p, err)
	}
	sort.Strings(names)
	res := &ListResult{Path: p, Entries: []Entry{}}
	if p == "" {
		res.Path = "."
	}
	for _, n := range names {
		if len(res.Entries) == max {
			res.Truncated = true
			break
		}
		var st unix.Stat_t
		if err := unix.Fstatat(int(dir.Fd()), n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
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

// walker visits directories without following symbolic links, counting
// the entries it sees against MaxScan.
type walker struct {
	scanned int
	full    bool
}

// readDir lists the directory open at fd, sorted by name.
func (w *walker) readDir(fd int) ([]os.DirEntry, error) {
	// A fresh open file description: a dup would share (and move) the
	// directory offset of fd.
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	file := os.NewFile(uintptr(d), "")
	defer file.Close()
	entries, err := file.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	if w.scanned+len(entries) > MaxScan {
		entries = entries[:max(MaxScan-w.scanned, 0)]
		w.full = true
	}
	w.scanned += len(entries)
	return entries, nil
}

func openSub(fd int, name string) (int, error) {
	return unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
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
		var st unix.Stat_t
		if err := unix.Fstatat(f.root, pattern, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			res.Matches = append(res.Matches, Entry{Path: pattern, Type: typeName(fileMode(st.Mode))})
		}
		return res, nil
	}
	start := strings.Join(comps[:literal], "/")
	dir, err := f.openRead(start, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && (e.Code == CodeNotFound || e.Code == CodeNotDir) {
			return res, nil
		}
		return nil, err
	}
	defer dir.Close()
	g := &globber{seen: map[string]bool{}, max: max}
	g.walk(int(dir.Fd()), start, comps[literal:])
	sort.Slice(g.out, func(i, j int) bool { return g.out[i].Path < g.out[j].Path })
	res.Matches = append(res.Matches, g.out...)
	res.Truncated = g.truncated || g.w.full
	return res, nil
}

type globber struct {
	w         walker
	seen      map[string]bool
	out       []Entry
	max       int
	truncated bool
}

func (g *globber) add(p string, e os.DirEntry) {
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

// walk matches rest against the directory open at fd (path rel).
func (g *globber) walk(fd int, rel string, rest []string) {
	if g.done() || len(rest) == 0 {
		return
	}
	entries, err := g.w.readDir(fd)
	if err != nil {
		return
	}
	c := rest[0]
	if c == "**" {
		// Zero directories.
		if len(rest) > 1 {
			g.walk(fd, rel, rest[1:])
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
				g.sub(fd, e.Name(), p, rest)
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
			g.sub(fd, e.Name(), p, rest[1:])
		}
	}
}

func (g *globber) sub(fd int, name, rel string, rest []string) {
	sfd, err := openSub(fd, name)
	if err != nil {
		return
	}
	defer unix.Close(sfd)
	g.walk(sfd, rel, rest)
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
	top, err := f.openRead(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer top.Close()
	s := &searcher{re: re, include: o.Include, max: max, budget: o.MaxOutput * 3 / 4, res: res}
	st, err := top.Stat()
	if err != nil {
		return nil, sysError(p, err)
	}
	switch {
	case st.IsDir():
		s.dir(int(top.Fd()), res.Path)
	case st.Mode().IsRegular():
		s.file(top, p, true)
	default:
		return nil, errorf(CodeNotFile, "%s: not a regular file or directory", p)
	}
	res.Truncated = res.Truncated || s.w.full
	return res, nil
}

type searcher struct {
	w       walker
	re      *regexp.Regexp
	include string
	max     int
	budget  int
	used    int
	res     *SearchResult
}

func (s *searcher) done() bool { return s.res.Truncated || s.w.full }

func (s *searcher) dir(fd int, rel string) {
	entries, err := s.w.readDir(fd)
	if err != nil {
		return
	}
	for _, e := range entries {
		if s.done() {
			return
		}
		p := joinPath(rel, e.Name())
		switch {
		case e.IsDir():
			sfd, err := openSub(fd, e.Name())
			if err != nil {
				continue
			}
			s.dir(sfd, p)
			unix.Close(sfd)
		case e.Type().IsRegular():
			if s.include != "" {
				if ok, _ := path.Match(s.include, e.Name()); !ok {
					continue
				}
			}
			ffd, err := unix.Openat(fd, e.Name(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			file := os.NewFile(uintptr(ffd), p)
			s.file(file, p, false)
			file.Close()
		}
	}
}

func (s *searcher) file(file *os.File, p string, _ bool) {
	st, err := file.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return
	}
	if st.Size() > MaxSearchFileBytes {
		s.res.SkippedLarge++
		return
	}
	data, err := io.ReadAll(io.LimitReader(file, MaxSearchFileBytes+1))
	if err != nil {
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
	var st unix.Stat_t
	switch err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); {
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
		old, err := readAt(int(dir.Fd()), name, p)
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
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, sysError(p, err)
	}
	out := os.NewFile(uintptr(fd), p)
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

// readAt reads the regular file name in dirfd, not following a link, at
// most MaxWriteBytes.
func readAt(dirfd int, name, p string) ([]byte, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, sysError(p, err)
	}
	file := os.NewFile(uintptr(fd), p)
	defer file.Close()
	st, err := file.Stat()
	if err != nil {
		return nil, sysError(p, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(CodeNotFile, "%s: not a regular file", p)
	}
	if st.Size() > MaxWriteBytes {
		return nil, errorf(CodeTooLarge, "%s: larger than %d bytes", p, MaxWriteBytes)
	}
	data, err := io.ReadAll(io.LimitReader(file, MaxWriteBytes+1))
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
	var st unix.Stat_t
	if err := unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, sysError(p, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, errorf(CodeSymlink, "%s: is a symbolic link; file tools do not write through links", p)
	}
	data, err := readAt(int(dir.Fd()), name, p)
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
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_TRUNC|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, sysError(p, err)
	}
	file := os.NewFile(uintptr(fd), p)
	if _, err := file.Write(out); err != nil {
		file.Close()
		return nil, sysError(p, err)
	}
	if err := file.Close(); err != nil {
		return nil, sysError(p, err)
	}
	return &WriteResult{Path: p, Size: int64(len(out)), SHA256: sha256Hex(out), PreviousSHA256: cur, Replacements: n}, nil
}
