package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/corral-sandbox/corral/sandbox/api"
	"golang.org/x/sys/unix"
)

// Config is the daemon's trusted configuration: its flags.
type Config struct {
	// Socket is the unix socket to listen on; "" means api.DefaultSocket.
	// A socket passed by systemd (LISTEN_FDS) is used instead when there
	// is one.
	Socket string
	// SocketGroup owns the socket (mode 0660) when the group exists; else
	// the socket is root's alone (0600).
	SocketGroup string
	// StateDir is the state directory the daemon owns, alone.
	StateDir string
	// AdminGroup's members see and touch every session, as root does; ""
	// for none. A group that does not exist is an error.
	AdminGroup string
	// MaxRunning caps running calls host-wide; QueueWait bounds the wait
	// for a slot.
	MaxRunning int
	QueueWait  time.Duration
	// MaxRunningPerUID caps the calls one owner runs at once
	// (Options.MaxRunningPerUID); 0 for none.
	MaxRunningPerUID int
	// Grace is how long SIGTERM waits for calls in flight before
	// canceling them.
	Grace time.Duration
	// MaxSessionsPerUID caps the sessions of one uid but root (of one
	// Pod in Pod mode); 0 for none.
	MaxSessionsPerUID int
	// MaxSessions caps the sessions of every owner together; 0 for none.
	MaxSessions int
	// MaxMemory caps, in bytes, the memory limits of the calls running
	// at once (Options.MaxMemory); 0 for none.
	MaxMemory int64
	// MaxWriteAreaPerUID and MaxWriteArea cap, in bytes, the write areas
	// of one owner's sessions and of every session
	// (Options.MaxWriteAreaPerUID); 0 for none.
	MaxWriteAreaPerUID, MaxWriteArea int64
	// MaxConnections caps the connections open at once; 0 means
	// DefaultMaxConnections.
	MaxConnections int
	// MaxConnectionsPerUID caps the connections one owner holds open at
	// once: a uid but the admins', in Pod mode a Pod (Server.connOwner); 0
	// for none.
	MaxConnectionsPerUID int
	// MaxKeptPatchBytes caps the bytes of one owner's kept patches (a
	// Pod's in Pod mode, else a uid's but root's:
	// Options.MaxKeptPatchBytes); 0 for none.
	MaxKeptPatchBytes int64
	// KeptPatchRetention is how long an owner's kept patch stays
	// (Options.KeptPatchRetention); 0 for ever.
	KeptPatchRetention time.Duration
	// IdleTTL is a new session's default idle TTL.
	IdleTTL time.Duration
	// KubeletRoot, when set, is the kubelet's root directory on the node
	// and puts the daemon in Pod mode (see Options.KubeletRoot).
	KubeletRoot string
	// Version is corral's build version.
	Version string
	// Log receives the daemon's notes (its standard error: the journal).
	Log io.Writer
}

// ErrLocked is a second daemon on a state directory that one serves.
var ErrLocked = errors.New("another corral daemon serves this state directory")

// lockState takes STATE_DIR/daemon.lock (flock, LOCK_EX|LOCK_NB) for the
// daemon's life and writes its pid into it. The lock goes with the
// process, however it ends.
func lockState(stateDir string) (*os.File, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the state directory: %w", err)
	}
	p := filepath.Join(stateDir, "daemon.lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", p, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		pid, _ := io.ReadAll(io.LimitReader(f, 32))
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (%s, pid %s)", ErrLocked, stateDir, strings.TrimSpace(string(pid)))
		}
		return nil, fmt.Errorf("locking %s: %w", p, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// lookupGroup returns the gid of group name, or -1 with ok false when no
// such group exists.
func lookupGroup(name string) (int, bool, error) {
	g, err := user.LookupGroup(name)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, err
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return -1, false, err
	}
	return gid, true, nil
}

// listen returns the socket systemd passed (socket activation), or a new
// one at cfg.Socket: its directory 0755, the socket 0660 owned by
// root:SocketGroup when that group exists, else 0600 (root only). A
// stale socket file is replaced; one that answers is another daemon's.
// created says the daemon made the socket file (and removes it at exit).
func listen(cfg Config) (l net.Listener, created bool, err error) {
	ls, err := activation.Listeners()
	if err != nil {
		return nil, false, fmt.Errorf("systemd socket activation: %w", err)
	}
	for _, l := range ls {
		if l != nil && l.Addr().Network() == "unix" {
			fmt.Fprintf(cfg.Log, "corral daemon: listening on %s (from systemd)\n", l.Addr())
			return l, false, nil
		}
	}
	sock := cfg.Socket
	if sock == "" {
		sock = api.DefaultSocket
	}
	if !filepath.IsAbs(sock) {
		return nil, false, fmt.Errorf("socket %q: %w: want an absolute path", sock, errdefs.ErrInvalidArgument)
	}
	dir := filepath.Dir(sock)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, false, err
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			return nil, false, err
		}
	}
	if st, err := os.Lstat(sock); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, false, fmt.Errorf("socket %s: %w: a file that is not a socket is in the way", sock, errdefs.ErrAlreadyExists)
		}
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			c.Close()
			return nil, false, fmt.Errorf("socket %s: %w: another daemon answers there", sock, errdefs.ErrAlreadyExists)
		}
		if err := os.Remove(sock); err != nil {
			return nil, false, fmt.Errorf("removing the stale socket %s: %w", sock, err)
		}
	}
	gid, haveGroup := -1, false
	if cfg.SocketGroup != "" {
		if gid, haveGroup, err = lookupGroup(cfg.SocketGroup); err != nil {
			return nil, false, fmt.Errorf("socket group %q: %w", cfg.SocketGroup, err)
		}
	}
	// Created owner-only, then opened to the group: never wider than
	// meant, not even for a moment.
	old := unix.Umask(0o177)
	l, err = net.Listen("unix", sock)
	unix.Umask(old)
	if err != nil {
		return nil, false, err
	}
	mode := os.FileMode(0o600)
	if haveGroup {
		if err := os.Chown(sock, 0, gid); err != nil {
			l.Close()
			return nil, false, err
		}
		mode = 0o660
	}
	if err := os.Chmod(sock, mode); err != nil {
		l.Close()
		return nil, false, err
	}
	who := "root only"
	if haveGroup {
		who = "group " + cfg.SocketGroup
	}
	fmt.Fprintf(cfg.Log, "corral daemon: listening on %s (%s)\n", sock, who)
	return l, true, nil
}

// Run is `corral daemon`: it takes the state directory's lock, connects
// the backend (newBackend), sweeps what a crash left (interrupted
// applies, then containers, leases and mounts of dead owners), undoes the
// creations a stopped daemon left unfinished (Server.ForgetMissing), then
// re-adopts every persistent session left, listens, and serves until ctx ends (SIGTERM).
// Then it stops accepting, lets the calls in flight finish for
// cfg.Grace, cancels the rest (their containers are killed and reaped),
// and closes every session without removing it: a restarted daemon
// continues them.
func Run(ctx context.Context, cfg Config, newBackend func(context.Context) (Backend, error)) (retErr error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	adminGID := -1
	if cfg.AdminGroup != "" {
		gid, ok, err := lookupGroup(cfg.AdminGroup)
		if err != nil {
			return fmt.Errorf("admin group %q: %w", cfg.AdminGroup, err)
		}
		if !ok {
			return fmt.Errorf("admin group %q: %w: no such group", cfg.AdminGroup, errdefs.ErrInvalidArgument)
		}
		adminGID = gid
	}
	lock, err := lockState(cfg.StateDir)
	if err != nil {
		return err
	}
	defer lock.Close()
	b, err := newBackend(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := b.Close(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := b.Recover(ctx); err != nil {
		fmt.Fprintf(cfg.Log, "corral daemon: sweeping what a crash left: %v\n", err)
	}
	srv, err := NewServer(b, Options{Version: cfg.Version, AdminGID: adminGID, MaxRunning: cfg.MaxRunning, QueueWait: cfg.QueueWait, MaxRunningPerUID: cfg.MaxRunningPerUID,
		DefaultIdleTTL: cfg.IdleTTL, MaxSessionsPerUID: cfg.MaxSessionsPerUID, MaxSessions: cfg.MaxSessions, MaxMemory: cfg.MaxMemory,
		MaxWriteAreaPerUID: cfg.MaxWriteAreaPerUID, MaxWriteArea: cfg.MaxWriteArea,
		MaxKeptPatchBytes: cfg.MaxKeptPatchBytes, KeptPatchRetention: cfg.KeptPatchRetention,
		StateDir: cfg.StateDir, KubeletRoot: cfg.KubeletRoot, Log: cfg.Log})
	if err != nil {
		return err
	}
	// Creations a stopped daemon left unfinished are undone before any
	// session is adopted: an undone session is never re-opened, nor its
	// containers created ahead.
	if err := srv.ForgetMissing(ctx); err != nil {
		return err
	}
	if err := b.Adopt(ctx, srv.warmOwnerOf); err != nil {
		fmt.Fprintf(cfg.Log, "corral daemon: adopting sessions: %v\n", err)
	}
	// Pods deleted while the daemon was down.
	srv.logEnded(srv.EndGonePods(ctx))
	l, created, err := listen(cfg)
	if err != nil {
		return err
	}
	if created {
		defer os.Remove(l.Addr().String())
	}
	if cfg.MaxConnections <= 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	l = limitConns(l, cfg.MaxConnections, cfg.MaxConnectionsPerUID, srv.connOwner)
	// Calls derive their context from calls: canceled after the grace.
	calls, cancelCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelCalls()
	hs := &http.Server{
		Handler:           srv,
		ConnContext:       srv.ConnContext,
		BaseContext:       func(net.Listener) context.Context { return calls },
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(l) }()
	go pruneLoop(calls, srv, cfg.Log)
	if cfg.KubeletRoot != "" {
		go func() {
			if err := srv.WatchPods(calls); err != nil {
				fmt.Fprintf(cfg.Log, "corral daemon: watching the kubelet's pods: %v (deleted Pods' sessions end on the prune timer)\n", err)
			}
		}()
	}
	fmt.Fprintf(cfg.Log, "corral daemon: serving state directory %s (pid %d; caps: %s)\n", cfg.StateDir, os.Getpid(), capsOf(cfg))

	select {
	case err := <-served:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(cfg.Log, "corral daemon: stopping: no new connections; calls in flight have %s\n", cfg.Grace)
	grace, cancel := context.WithTimeout(context.Background(), cfg.Grace)
	defer cancel()
	if err := hs.Shutdown(grace); err != nil {
		fmt.Fprintf(cfg.Log, "corral daemon: canceling the calls still running after %s\n", cfg.Grace)
		cancelCalls()
		wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hs.Shutdown(wait); err != nil {
			_ = hs.Close()
		}
	}
	cancelCalls()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pruneLoop removes sessions past their idle TTL, once a minute, then
// sweeps what no live owner holds (Backend.Sweep).
func pruneLoop(ctx context.Context, srv *Server, log io.Writer) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		out, err := srv.PruneExpired(ctx)
		for _, p := range out.Pruned {
			fmt.Fprintf(log, "corral daemon: session %s expired and was removed (patch: %s)\n", p.Removed, orNone(p.Patch))
		}
		if err != nil {
			fmt.Fprintf(log, "corral daemon: pruning: %v\n", err)
		}
		srv.logEnded(srv.EndGonePods(ctx))
		if err := srv.SweepKeptPatches(ctx); err != nil {
			fmt.Fprintf(log, "corral daemon: removing kept patches past --kept-patch-retention: %v\n", err)
		}
		swept, err := srv.b.Sweep(ctx)
		for _, l := range swept {
			fmt.Fprintf(log, "corral daemon: %s\n", l)
		}
		if err != nil {
			fmt.Fprintf(log, "corral daemon: sweeping: %v\n", err)
		}
		// What the sandbox's sweep removed keeps no owner record.
		if err := srv.forgetRemoved(ctx); err != nil {
			fmt.Fprintf(log, "corral daemon: forgetting removed sessions: %v\n", err)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// capsOf says the daemon's caps in one line.
func capsOf(cfg Config) string {
	orNoCap := func(n int64, f func(int64) string) string {
		if n <= 0 {
			return "none"
		}
		return f(n)
	}
	count := func(n int64) string { return strconv.FormatInt(n, 10) }
	return fmt.Sprintf("%d calls at once, per owner %s, memory of running calls %s, sessions %s, per owner %s, write areas %s, per owner %s, connections %d, per owner %s, kept patches per owner %s",
		cfg.MaxRunning, orNoCap(int64(cfg.MaxRunningPerUID), count), orNoCap(cfg.MaxMemory, size), orNoCap(int64(cfg.MaxSessions), count),
		orNoCap(int64(cfg.MaxSessionsPerUID), count), orNoCap(cfg.MaxWriteArea, size), orNoCap(cfg.MaxWriteAreaPerUID, size),
		cfg.MaxConnections, orNoCap(int64(cfg.MaxConnectionsPerUID), count), orNoCap(cfg.MaxKeptPatchBytes, size))
}
