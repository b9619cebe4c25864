package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/fscred"
	"github.com/corral-sandbox/corral/internal/kubepod"
	"github.com/corral-sandbox/corral/internal/rootfs"
	"golang.org/x/sys/unix"
)

// Peer is the process at the other end of a connection, as the kernel
// reported it when the connection was accepted (SO_PEERCRED: the
// credentials the client had at connect(2); SO_PEERGROUPS: its
// supplementary groups then). Nothing a client sends can change it.
type Peer struct {
	UID, GID, PID int
	Groups        []int
	// Pod is the UID of the Kubernetes Pod the peer runs in (Pod mode
	// only; "" for none); PodErr says why it could not be told.
	Pod    string
	PodErr error
}

type peerKey struct{}

// peerOf returns the peer ConnContext attached to ctx.
func peerOf(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// withPeer is http.Server.ConnContext: it reads the peer's credentials
// from the accepted unix socket. A connection whose peer cannot be read
// gets no peer, and every request on it is refused.
func withPeer(ctx context.Context, c net.Conn) context.Context {
	uc, ok := unixConn(c)
	if !ok {
		return ctx
	}
	p, err := peerCred(uc)
	if err != nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, p)
}

func peerCred(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var p Peer
	var serr error
	err = raw.Control(func(fd uintptr) {
		var cred *unix.Ucred
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if serr != nil {
			return
		}
		p = Peer{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}
		p.Groups, serr = peerGroups(int(fd))
	})
	if err == nil {
		err = serr
	}
	return p, err
}

// peerGroups reads SO_PEERGROUPS (Linux 4.13): the peer's supplementary
// groups at connect time.
func peerGroups(fd int) ([]int, error) {
	buf := make([]uint32, 64)
	for {
		n := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)), 0)
		switch {
		case e == unix.ERANGE && int(n) > len(buf)*4:
			buf = make([]uint32, n/4+1)
			continue
		case e != 0:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
		}
		out := make([]int, n/4)
		for i := range out {
			out[i] = int(buf[i])
		}
		return out, nil
	}
}

// soPeerPIDFD is SO_PEERPIDFD (Linux 6.5, include/uapi/asm-generic/
// socket.h): a pidfd of the process that connected, taken by the kernel at
// connect(2).
const soPeerPIDFD = 77

// peerPidfd returns a pidfd of c's peer: SO_PEERPIDFD where the kernel
// has it, so it is the very process that connected; else pidfd_open of
// the SO_PEERCRED pid (a pid reused between connect(2) and now would be
// taken for the peer: the one window older kernels leave). The caller
// closes it.
func peerPidfd(c *net.UnixConn, pid int) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, err
	}
	pidfd, serr := -1, error(nil)
	err = raw.Control(func(fd uintptr) {
		pidfd, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, soPeerPIDFD)
	})
	if err == nil && serr == nil {
		return pidfd, nil
	}
	if errors.Is(serr, unix.ENOPROTOOPT) {
		return unix.PidfdOpen(pid, 0)
	}
	return -1, errors.Join(err, serr)
}

// podOf returns the Pod UID of c's peer ("" when it is in no Pod).
func podOf(c net.Conn, p Peer) (string, error) {
	uc, ok := unixConn(c)
	if !ok {
		return "", errors.New("not a unix socket")
	}
	pidfd, err := peerPidfd(uc, p.PID)
	if err != nil {
		return "", fmt.Errorf("the caller's pidfd: %w", err)
	}
	defer unix.Close(pidfd)
	uid, err := kubepod.Identify("/proc", pidfd)
	if errors.Is(err, kubepod.ErrNoPod) {
		return "", nil
	}
	return uid, err
}

// ownPod returns the Pod the daemon itself runs in ("" for none).
func ownPod() (string, error) {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(pidfd)
	uid, err := kubepod.Identify("/proc", pidfd)
	if errors.Is(err, kubepod.ErrNoPod) {
		return "", nil
	}
	return uid, err
}

// inGroup reports whether the peer is a member of gid, as primary or
// supplementary group.
func (p Peer) inGroup(gid int) bool {
	return p.GID == gid || slices.Contains(p.Groups, gid)
}

// Access modes for asPeer.
const (
	accessRead  = unix.R_OK
	accessWrite = unix.W_OK
	accessDir   = unix.X_OK
)

// openDirAsPeer opens the directory unsafePath with the peer's file
// system credentials and checks that the peer may read and search it,
// so the daemon (root) never lends its own access: every component on
// the way is searched, and the directory's mode, ACLs and LSM labels
// judged, by the kernel as for the peer itself. It returns the
// directory's path with every symbolic link resolved (as the kernel
// resolved it at the open) and its identity; the caller pins the
// session to that inode.
//
// How: on a goroutine locked to its OS thread, setfsuid/setfsgid and a
// per-thread setgroups (raw system calls: glibc and Go's syscall package
// would change every thread) give the thread the peer's credentials for
// file system access — changing the fsuid from 0 drops
// CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the thread's effective
// set (capabilities(7)) — then open(O_PATH|O_DIRECTORY) and
// faccessat2(AT_EACCESS), which judges by those credentials. The thread
// is never unlocked: the runtime ends it with the goroutine, so the
// changed credentials can never serve another goroutine. Cheaper than a
// child process with dropped credentials, and the same kernel checks.
func openDirAsPeer(p Peer, unsafePath string) (real string, st unix.Stat_t, err error) {
	if !filepath.IsAbs(unsafePath) {
		return "", st, fmt.Errorf("repository %q: %w: want an absolute path", unsafePath, errdefs.ErrInvalidArgument)
	}
	if err := noNUL("repository", unsafePath); err != nil {
		return "", st, err
	}
	err = asPeer(p, func() error {
		fd, err := unix.Open(unsafePath, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := faccess(fd, "", accessRead|accessDir); err != nil {
			return err
		}
		if err := unix.Fstat(fd, &st); err != nil {
			return err
		}
		real, err = os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
		return err
	})
	if err != nil {
		return "", st, accessError("repository", unsafePath, p, err)
	}
	return real, st, nil
}

// checkAsPeer checks that the peer may access path with mode (accessRead,
// accessWrite, accessDir, or'ed), following symbolic links as the peer
// would.
func checkAsPeer(p Peer, what, path string, mode uint32) error {
	if err := asPeer(p, func() error { return faccess(unix.AT_FDCWD, path, mode) }); err != nil {
		return accessError(what, path, p, err)
	}
	return nil
}

// checkBelowAsPeer is checkAsPeer of the directory rel below root, root
// itself opened by the daemon: in Pod mode the repository is the
// caller's own volume, which the caller reaches through its container's
// mount, never through the kubelet's directory on the node (0750 root:
// the caller may not search it, so every check through that path failed).
// Each component below root is searched as the peer, never through a
// symbolic link (openComponentsAsPeer); the last is judged for mode.
func checkBelowAsPeer(p Peer, what, root, rel string, mode uint32) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return accessError(what, joinRepo(root, rel), p, err)
	}
	defer unix.Close(rfd)
	err = asPeer(p, func() error {
		fd, _, err := openComponentsAsPeer(rfd, rel)
		if err != nil {
			return err
		}
		if fd < 0 {
			return unix.ENOENT
		}
		defer unix.Close(fd)
		return faccess(fd, "", mode)
	})
	if err != nil {
		return accessError(what, joinRepo(root, rel), p, err)
	}
	return nil
}

// noNUL refuses a host path with a NUL byte, which no system call can
// take (they answer EINVAL, which would read as corral's own failure).
func noNUL(what, path string) error {
	if strings.IndexByte(path, 0) >= 0 {
		return fmt.Errorf("%s %q: %w: contains a NUL byte", what, path, errdefs.ErrInvalidArgument)
	}
	return nil
}

func accessError(what, path string, p Peer, err error) error {
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s %q: %w: it does not exist (as uid %d, the caller, sees it)", what, path, errdefs.ErrInvalidArgument, p.UID)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%s %q: %w: uid %d (the caller) may not access it", what, path, errdefs.ErrPermissionDenied, p.UID)
	}
	return fmt.Errorf("%s %q: checking access as the calling user: %w", what, path, err)
}

// faccess is faccessat2(dirfd, path, mode, AT_EACCESS, plus AT_EMPTY_PATH
// when path is ""). AT_EACCESS makes the kernel judge by the thread's
// current (fs) credentials instead of its real ones.
func faccess(dirfd int, path string, mode uint32) error {
	flags := unix.AT_EACCESS
	if path == "" {
		flags |= unix.AT_EMPTY_PATH
	}
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_FACCESSAT2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(mode), uintptr(flags), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// asPeer runs f on a fresh OS thread whose file system credentials are
// the peer's (see openDirAsPeer). Root's own calls run f directly.
func asPeer(p Peer, f func() error) error {
	if p.UID == 0 {
		return f()
	}
	return p.creds().Do(f)
}

// creds are the peer's file-system credentials (package fscred).
func (p Peer) creds() fscred.Creds {
	return fscred.Creds{UID: p.UID, GID: p.GID, Groups: p.Groups}
}

// readFileAsPeer reads the file at path (at most max bytes) with the
// peer's file system credentials (see asPeer): the daemon reads only what
// the caller could read itself, and reads it once, so no later swap of
// the path can change what was checked.
func readFileAsPeer(p Peer, what, path string, max int64) ([]byte, error) {
	if err := noNUL(what, path); err != nil {
		return nil, err
	}
	var data []byte
	err := asPeer(p, func() error {
		f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if !st.Mode().IsRegular() {
			return fmt.Errorf("%w: not a regular file", errdefs.ErrInvalidArgument)
		}
		data, err = io.ReadAll(io.LimitReader(f, max+1))
		if err == nil && int64(len(data)) > max {
			err = fmt.Errorf("%w: larger than %d bytes", errdefs.ErrInvalidArgument, max)
		}
		return err
	})
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		if errdefs.IsInvalidArgument(err) {
			return nil, fmt.Errorf("%s %q: %w", what, path, err)
		}
		return nil, accessError(what, path, p, err)
	}
	return data, nil
}

// checkCopiedAsPeer checks, as the peer (see asPeer), that it may read
// everything a new session copies out of the repository at root (the
// directory openDirAsPeer resolved): the page file when page is set,
// else every directory (read and search) and regular file (read) of the
// write directory dir, both repo-relative. The session copies them as
// root into its write area, owned by the container's uid: unchecked, a
// caller would read, through its own session's tools, files of another
// user's openwiki/ that the kernel refuses it (mode 0600, a 0700
// directory). Links are never followed (the copy takes none either); a
// part that does not exist has nothing to copy. Root's own calls are not
// checked.
func checkCopiedAsPeer(p Peer, root, dir, page string) error {
	if p.UID == 0 || (dir == "" && page == "") {
		return nil
	}
	var bad string
	err := asPeer(p, func() error {
		rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(rfd)
		target := dir
		if page != "" {
			target = filepath.Dir(page)
		}
		fd, rel, err := openComponentsAsPeer(rfd, target)
		bad = rel
		if err != nil || fd < 0 {
			return err
		}
		defer unix.Close(fd)
		if page != "" {
			bad = page
			err := faccessAt(fd, filepath.Base(page), accessRead)
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return err
		}
		return walkAsPeer(fd, dir, &bad)
	})
	if err != nil {
		return accessError("repository path", bad, p, err)
	}
	return nil
}

// openComponentsAsPeer opens rel below dirfd one component at a time,
// never following a link, each directory searched with the thread's
// credentials. fd is -1 when a component does not exist; rel is how far
// the walk got.
func openComponentsAsPeer(dirfd int, rel string) (fd int, at string, err error) {
	fd, err = unix.Openat(dirfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, ".", err
	}
	at = "."
	if rel == "." || rel == "" {
		return fd, at, nil
	}
	for _, name := range strings.Split(rel, "/") {
		at = filepath.Join(at, name)
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ENOENT) {
			return -1, at, nil
		}
		if err != nil {
			return -1, at, err
		}
		fd = next
		if err := faccess(fd, "", accessDir); err != nil {
			unix.Close(fd)
			return -1, at, err
		}
	}
	return fd, at, nil
}

// walkAsPeer checks the directory fd (repo-relative rel) and everything
// below it: directories readable and searchable, regular files readable.
// *bad is set to the path being checked.
func walkAsPeer(fd int, rel string, bad *string) error {
	*bad = rel
	if err := faccess(fd, "", accessRead|accessDir); err != nil {
		return err
	}
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(d), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	slices.Sort(names)
	for _, name := range names {
		*bad = rel + "/" + name
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			if err := faccessAt(fd, name, accessRead); err != nil {
				return err
			}
		case unix.S_IFDIR:
			sub, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			err = walkAsPeer(sub, rel+"/"+name, bad)
			unix.Close(sub)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// faccessAt is faccess of the entry name of dirfd, never following a
// link.
func faccessAt(dirfd int, name string, mode uint32) error {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_FACCESSAT2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(mode),
		uintptr(unix.AT_EACCESS|unix.AT_SYMLINK_NOFOLLOW), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// checkStickyAsPeer applies the kernel's restricted deletion rule to the
// repository file unsafeRel (repo-relative) that an apply, written as
// root, would replace or remove: in a directory with the sticky bit (as
// /tmp), only the file's owner, the directory's owner or a process with
// CAP_FOWNER may rename over or unlink it (unlink(2), rename(2): EPERM).
// A file that does not exist yet, or a directory without the sticky bit,
// passes; neither is resolved through a symbolic link.
func checkStickyAsPeer(p Peer, repo, unsafeRel string) error {
	if p.UID == 0 || unsafeRel == "" {
		return nil
	}
	root, err := rootfs.OpenRoot(repo)
	if err != nil {
		return err
	}
	defer root.Close()
	dst, err := root.Lstat(path.Dir(unsafeRel), rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("repository directory %q: %w", path.Dir(unsafeRel), err)
	}
	if dst.Mode&unix.S_ISVTX == 0 {
		return nil
	}
	fst, err := root.Lstat(unsafeRel, rootfs.NoSymlinks)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("repository file %q: %w", unsafeRel, err)
	}
	if int(fst.Uid) == p.UID || int(dst.Uid) == p.UID {
		return nil
	}
	return fmt.Errorf("repository file %q: %w: uid %d (the caller) may not replace or remove it (sticky directory, another user's file)",
		unsafeRel, errdefs.ErrPermissionDenied, p.UID)
}
