package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/corral-sandbox/corral/internal/config"
	"github.com/corral-sandbox/corral/internal/daemon"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	units "github.com/docker/go-units"
	"github.com/spf13/cobra"
)

func newDaemonCommand(g *globalFlags) *cobra.Command {
	cfg := daemon.Config{}
	var maxWarm int
	var reapCgroup string
	var poolIdle time.Duration
	var writeAreaPerUID, writeArea string
	cmd := &cobra.Command{
		Use:   "daemon [--socket PATH] [--admin-group NAME] [--max-running N] [--queue-wait DUR] [--max-memory SIZE] [--max-sessions N] [--max-warm N] [--kubelet-root DIR]",
		Short: "Own every session of the state directory and serve the API on a unix socket",
		Long: `Runs corral's long-lived owner: one process per state directory (a second
one on the same directory refuses to start), serving the HTTP/JSON API
(/v1, described at GET /v1/openapi.json and in docs/api/openapi.yaml) on a
unix socket, or on the socket systemd passes (socket activation).

At start it finishes or rolls back interrupted applies, removes the
containers, leases and mounts a crash left, and re-adopts every persistent
session of the state directory. A session belongs to the uid that created
it (SO_PEERCRED); other uids get 404 for it, root and members of
--admin-group see every session. Over --max-running calls at once, or
when the memory limits of the calls running would pass --max-memory, a
call waits up to --queue-wait, then gets 429 busy. Creating a session
takes a slot of --max-running too. Over --max-sessions (every owner's) or
--max-sessions-per-uid (one owner's), or when its write area (the
profile's write_area, a tmpfs held for the session's life) would pass
--max-write-area (every session's) or --max-write-area-per-uid (one
owner's), a creation gets 422; a uid's call
over --max-running-per-uid waits for one of its own to end; over
--max-connections (every caller's) or --max-connections-per-uid (one
uid's, in Pod mode one Pod's; not the admins') a new connection gets 503
and is closed.

--kubelet-root DIR (Pod mode, for a DaemonSet): a caller is identified by
its Pod (its process's cgroup names the Pod's UID) and owns its sessions as
"pod:UID"; a caller in no Pod is refused unless it is root (the node's
admin). A session's repository is then a volume of the calling Pod
(--volume NAME[/SUBPATH]), never a path. When the Pod is deleted its
sessions end and their change sets are kept as patches (GET /v1/patches).

SIGTERM or SIGINT: no new connections; calls in flight have --grace to
finish, then are canceled (their containers killed and reaped); sessions
are closed, never removed: a restarted daemon continues them. See
docs/daemon.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case cfg.MaxRunning < 1:
				return usageError(fmt.Errorf("--max-running %d: want at least 1", cfg.MaxRunning))
			case cfg.QueueWait < 0:
				return usageError(fmt.Errorf("--queue-wait %s: want 0 or more", cfg.QueueWait))
			case maxWarm < 0:
				return usageError(fmt.Errorf("--max-warm %d: want 0 or more", maxWarm))
			case poolIdle <= 0:
				return usageError(fmt.Errorf("--pool-idle %s: want more than 0", poolIdle))
			case cfg.MaxSessionsPerUID < 0:
				return usageError(fmt.Errorf("--max-sessions-per-uid %d: want 0 (no cap) or more", cfg.MaxSessionsPerUID))
			case cfg.MaxRunningPerUID < 0:
				return usageError(fmt.Errorf("--max-running-per-uid %d: want 0 (no cap) or more", cfg.MaxRunningPerUID))
			case cfg.MaxConnectionsPerUID < 0:
				return usageError(fmt.Errorf("--max-connections-per-uid %d: want 0 (no cap) or more", cfg.MaxConnectionsPerUID))
			case cfg.IdleTTL <= 0:
				return usageError(fmt.Errorf("--idle-ttl %s: want a duration above 0", cfg.IdleTTL))
			}
			for _, a := range []struct {
				flag, val string
				to        *int64
			}{{"max-write-area-per-uid", writeAreaPerUID, &cfg.MaxWriteAreaPerUID}, {"max-write-area", writeArea, &cfg.MaxWriteArea}} {
				n, err := units.RAMInBytes(a.val)
				if err != nil || n < 0 {
					return usageError(fmt.Errorf("--%s %q: want bytes or a size with a binary unit (4GiB, 512MiB), 0 for no cap", a.flag, a.val))
				}
				*a.to = n
			}
			if !cmd.Flags().Changed("max-running-per-uid") {
				cfg.MaxRunningPerUID = daemon.DefaultMaxRunningPerUID(cfg.MaxRunning)
			}
			log := cmd.ErrOrStderr()
			if !cmd.Flags().Changed("socket") && g.cfg.DaemonSocket != "" {
				cfg.Socket = g.cfg.DaemonSocket // $CORRAL_DAEMON_SOCKET, config daemon_socket
			}
			cfg.StateDir, cfg.Version, cfg.Log = g.stateDir, sandbox.Version(), log
			cfg.KubeletRoot = g.cfg.KubeletRoot // --kubelet-root, $CORRAL_KUBELET_ROOT, config kubelet_root
			// --max-sessions, --max-memory, --max-connections: also
			// CORRAL_MAX_* and config max_*.
			cfg.MaxSessions, cfg.MaxMemory, cfg.MaxConnections = g.cfg.MaxSessions, g.cfg.MaxMemory, g.cfg.MaxConnections
			// --max-kept-patch-bytes, --kept-patch-retention: also
			// CORRAL_* and config keys.
			cfg.MaxKeptPatchBytes, cfg.KeptPatchRetention = g.cfg.MaxKeptPatchBytes, g.cfg.KeptPatchRetention
			sc := g.config(log)
			sc.Log = g.progress(log, defaultDaemonLevel) // a long-lived process says what it does
			sc.Cold, sc.MaxWarm, sc.PoolIdle, sc.ReapCgroup = maxWarm == 0, maxWarm, poolIdle, reapCgroup
			// Pod mode runs in a Pod whose /sys/fs/cgroup is its own
			// cgroup: the node's hierarchies (limits hit, the kill of a
			// call, the cgroups runtimes leave, the reap cgroup) are
			// reached through the node's init.
			sc.InPod = cfg.KubeletRoot != ""
			if sc.InPod && !cmd.Flags().Changed("reap-cgroup") {
				// Off unless asked for: on a saturated node a shim at
				// 1/16 of a share delays the deletes a session's
				// removal waits for (seen at load 100-200 on the test
				// cluster, not told apart from the load itself).
				sc.ReapCgroup = ""
			}
			// Pod mode runs in a Pod: its session mounts must reach the
			// node's mount namespace, where containerd and runc resolve
			// them, through the state directory's Bidirectional hostPath.
			sc.SharedMounts = cfg.KubeletRoot != ""
			err := daemon.Run(cmd.Context(), cfg, func(ctx context.Context) (daemon.Backend, error) {
				return daemon.NewBackend(ctx, sc)
			})
			if errors.Is(err, daemon.ErrLocked) {
				return &exitError{code: exitFailed, err: err}
			}
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Socket, "socket", api.DefaultSocket, "unix socket to listen on (unless systemd passes one; default $CORRAL_DAEMON_SOCKET, config daemon_socket, else "+api.DefaultSocket+")")
	f.StringVar(&cfg.SocketGroup, "socket-group", "corral", "group that may connect (socket mode 0660); when it does not exist the socket is root's alone (0600)")
	f.StringVar(&cfg.AdminGroup, "admin-group", "", "group whose members see and touch every session, as root does")
	f.IntVar(&cfg.MaxRunning, "max-running", max(4, 2*runtime.NumCPU()), "calls running a container at once, host-wide")
	f.IntVar(&cfg.MaxRunningPerUID, "max-running-per-uid", 0, "calls one uid other than root runs at once (in Pod mode: one Pod), so that one caller's long calls never hold every slot; 0 for no cap (default: --max-running less a quarter of it, at least 1)")
	f.DurationVar(&cfg.QueueWait, "queue-wait", 30*time.Second, "how long a call over --max-running waits for a slot before 429 busy")
	f.StringVar(&reapCgroup, "reap-cgroup", sandbox.DefaultReapCgroup, "cgroup (a path from the cgroup root) at 1/16 of a default CPU share, where the shim of a container being destroyed moves, so that deletes yield the CPU to calls and to pools' refills (in Pod mode, the node's cgroup, reached through its init); \"\" (the default in Pod mode) leaves shims in containerd's")
	f.IntVar(&maxWarm, "max-warm", sandbox.DefaultMaxWarm, "containers created ahead of calls, host-wide; each session keeps its profile's pool_depth (default 2) under it, and a call that finds none ready doubles its session's depth up to pool_max_depth (default 8) and half of --max-warm, leaving a quarter of --max-warm to other sessions' pool_depth; one owner's sessions (a uid but root; in Pod mode one Pod) grow past their pool_depth only while they hold, together, less than half of --max-warm; 0 creates each on its call")
	f.DurationVar(&poolIdle, "pool-idle", sandbox.DefaultPoolIdle, "how long after its last call a session's pool keeps the depth its bursts grew it to; then it shrinks back to pool_depth, destroying the extra containers")
	f.IntVar(&cfg.MaxSessionsPerUID, "max-sessions-per-uid", daemon.DefaultMaxSessionsPerUID, "sessions one uid other than root may hold at once (in Pod mode: one Pod); 0 for no cap")
	f.String("max-sessions", "", "sessions the daemon holds at once, every owner's together, root's included ($CORRAL_MAX_SESSIONS, config max_sessions; default 0: no cap)")
	f.String("max-memory", "", "cap on the memory limits of the calls running at once, e.g. 8GiB: each call reserves its profile's resources.memory, and over the cap waits as over --max-running ($CORRAL_MAX_MEMORY, config max_memory; default 0: no cap)")
	f.StringVar(&writeAreaPerUID, "max-write-area-per-uid", daemon.DefaultMaxWriteAreaPerUID, "bytes of write areas (each writable session's tmpfs, its profile's write_area) one uid other than root may hold at once (in Pod mode: one Pod), e.g. 4GiB; over it a creation gets 422; 0 for no cap")
	f.StringVar(&writeArea, "max-write-area", "0", "bytes of write areas every session holds together, root's included, e.g. 64GiB; over it a creation gets 422; 0 for no cap")
	f.String("max-connections", "", fmt.Sprintf("connections open at once; over it a connection is answered 503 and closed ($CORRAL_MAX_CONNECTIONS, config max_connections; default %d)", daemon.DefaultMaxConnections))
	f.IntVar(&cfg.MaxConnectionsPerUID, "max-connections-per-uid", daemon.DefaultMaxConnectionsPerUID, "connections one uid may hold open at once (in Pod mode: one Pod; root and --admin-group not capped), so that no caller can lock the others out; over it a connection is answered 503 and closed; 0 for no cap")
	f.String("max-kept-patch-bytes", "", "bytes of kept patches one owner may hold in the state directory (a uid but root, under STATE-DIR/patches/uid-N; in Pod mode a Pod; the admins not capped), e.g. 256MiB: a DELETE without discard over it is refused (422), and an owner an idle expiry left over it may create no session until it removes kept patches (DELETE /v1/patches/ID) ($CORRAL_MAX_KEPT_PATCH_BYTES, config max_kept_patch_bytes; default "+config.DefaultMaxKeptPatchBytes+"; 0: no cap)")
	f.String("kept-patch-retention", "", "how long an owner's kept patch stays after its session ended before the daemon removes it (audited) ($CORRAL_KEPT_PATCH_RETENTION, config kept_patch_retention; default "+config.DefaultKeptPatchRetention+"; 0: for ever)")
	f.DurationVar(&cfg.Grace, "grace", 30*time.Second, "on SIGTERM, how long calls in flight may finish before they are canceled")
	f.String("kubelet-root", "", "Pod mode: the kubelet's root directory on this node (e.g. /var/lib/kubelet); callers are identified by their Pod, and a session's repository is one of the calling Pod's own volumes ($CORRAL_KUBELET_ROOT, config kubelet_root; default off)")
	f.DurationVar(&cfg.IdleTTL, "idle-ttl", 24*time.Hour, "idle TTL of a session whose request names none: the profile's idle_ttl, shortened to this (docs/daemon.md, Idle sessions)")
	return cmd
}
