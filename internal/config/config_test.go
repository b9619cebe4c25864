package config

import (
	"io/fs"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/stretchr/testify/require"
)

func files(m map[string]string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		if d, ok := m[p]; ok {
			return []byte(d), nil
		}
		return nil, fs.ErrNotExist
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	file := "address: /file.sock\nnamespace: file-ns\nstate_dir: /file/state\nruntime: file-rt\nimage: file-img\ndaemon_socket: /file/d.sock\nlog_level: error\n"
	for _, tc := range []struct {
		name    string
		flags   map[string]string
		env     map[string]string
		files   map[string]string
		cfgPath string
		want    Config
		sources map[string]string
	}{
		{name: "defaults, no file", want: Config{Address: sandbox.DefaultAddress, Namespace: sandbox.DefaultNamespace, StateDir: sandbox.DefaultStateDir,
			Runtime: sandbox.DefaultRuntime, Image: sandbox.DefaultImageRef, DaemonSocket: DefaultDaemonSocket},
			sources: map[string]string{KeyAddress: "default", KeyLogLevel: "default"}},
		{name: "file", files: map[string]string{DefaultPath: file},
			want:    Config{Address: "/file.sock", Namespace: "file-ns", StateDir: "/file/state", Runtime: "file-rt", Image: "file-img", DaemonSocket: "/file/d.sock", LogLevel: "error", File: DefaultPath},
			sources: map[string]string{KeyAddress: "file " + DefaultPath}},
		{name: "env over file", files: map[string]string{DefaultPath: file},
			env: map[string]string{"CONTAINERD_ADDRESS": "/ctd.sock", "CORRAL_NAMESPACE": "env-ns", "CORRAL_LOG_LEVEL": "debug", "CORRAL_STATE_DIR": "/env/state",
				"CORRAL_RUNTIME": "env-rt", "CORRAL_IMAGE": "env-img", "CORRAL_DAEMON_SOCKET": "/env/d.sock"},
			want:    Config{Address: "/ctd.sock", Namespace: "env-ns", StateDir: "/env/state", Runtime: "env-rt", Image: "env-img", DaemonSocket: "/env/d.sock", LogLevel: "debug", File: DefaultPath},
			sources: map[string]string{KeyAddress: "env CONTAINERD_ADDRESS", KeyNamespace: "env CORRAL_NAMESPACE"}},
		{name: "CORRAL_ADDRESS over CONTAINERD_ADDRESS", env: map[string]string{"CONTAINERD_ADDRESS": "/ctd.sock", "CORRAL_ADDRESS": "/corral.sock"},
			want: Config{Address: "/corral.sock", Namespace: sandbox.DefaultNamespace, StateDir: sandbox.DefaultStateDir, Runtime: sandbox.DefaultRuntime,
				Image: sandbox.DefaultImageRef, DaemonSocket: DefaultDaemonSocket}, sources: map[string]string{KeyAddress: "env CORRAL_ADDRESS"}},
		{name: "flags over env over file", files: map[string]string{"/my.yaml": file}, cfgPath: "/my.yaml",
			env:     map[string]string{"CORRAL_ADDRESS": "/env.sock", "CORRAL_NAMESPACE": "env-ns"},
			flags:   map[string]string{KeyAddress: "/flag.sock", KeyLogLevel: "info"},
			want:    Config{Address: "/flag.sock", Namespace: "env-ns", StateDir: "/file/state", Runtime: "file-rt", Image: "file-img", DaemonSocket: "/file/d.sock", LogLevel: "info", File: "/my.yaml"},
			sources: map[string]string{KeyAddress: "flag --address", KeyNamespace: "env CORRAL_NAMESPACE", KeyStateDir: "file /my.yaml", KeyLogLevel: "flag --log-level"}},
		{name: "CORRAL_DAEMON", env: map[string]string{"CORRAL_DAEMON": "/d.sock"},
			want: Config{Address: sandbox.DefaultAddress, Namespace: sandbox.DefaultNamespace, StateDir: sandbox.DefaultStateDir, Runtime: sandbox.DefaultRuntime,
				Image: sandbox.DefaultImageRef, DaemonSocket: "/d.sock"}, sources: map[string]string{KeyDaemonSocket: "env CORRAL_DAEMON"}},
		{name: "CORRAL_CONFIG", files: map[string]string{"/env.yaml": "namespace: other\n"}, env: map[string]string{"CORRAL_CONFIG": "/env.yaml"},
			want: Config{Address: sandbox.DefaultAddress, Namespace: "other", StateDir: sandbox.DefaultStateDir, Runtime: sandbox.DefaultRuntime,
				Image: sandbox.DefaultImageRef, DaemonSocket: DefaultDaemonSocket, File: "/env.yaml"}},
		{name: "foreign namespace allowed in the file", files: map[string]string{DefaultPath: "namespace: moby\nallow_foreign_namespace: true\n"},
			want: Config{Address: sandbox.DefaultAddress, Namespace: "moby", StateDir: sandbox.DefaultStateDir, Runtime: sandbox.DefaultRuntime,
				Image: sandbox.DefaultImageRef, DaemonSocket: DefaultDaemonSocket, AllowForeignNamespace: true, File: DefaultPath}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(Inputs{ConfigPath: tc.cfgPath, Flags: tc.flags, Getenv: envOf(tc.env), ReadFile: files(tc.files)})
			require.NoError(t, err)
			for k, v := range tc.sources {
				require.Equal(t, v, got.Sources[k], k)
			}
			got.Sources = nil
			require.Equal(t, int64(256<<20), got.MaxKeptPatchBytes, "the default --max-kept-patch-bytes")
			require.Equal(t, 168*time.Hour, got.KeptPatchRetention, "the default --kept-patch-retention")
			got.MaxKeptPatchBytes, got.KeptPatchRetention = 0, 0
			require.Equal(t, tc.want, got)
		})
	}
}

func TestResolveErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		flags   map[string]string
		env     map[string]string
		files   map[string]string
		cfgPath string
		want    string
	}{
		{name: "unknown key", files: map[string]string{DefaultPath: "namespace: x\nadress: /a.sock\n"},
			want: `/etc/corral/config.yaml:2: unknown key "adress" (known: address, allow_foreign_namespace, daemon_socket, image, kept_patch_retention, kubelet_root, log_level, max_connections, max_kept_patch_bytes, max_memory, max_sessions, namespace, runtime, state_dir)`},
		{name: "second document", files: map[string]string{DefaultPath: "namespace: x\n---\nnamespace: [\n"},
			want: `/etc/corral/config.yaml:4: YAML syntax: did not find expected node content`},
		{name: "named file missing", cfgPath: "/nope.yaml",
			want: `config file /nope.yaml: invalid argument: it does not exist; create it or name another with --config or CORRAL_CONFIG`},
		{name: "moby", flags: map[string]string{KeyNamespace: "moby"},
			want: `namespace "moby" (flag --namespace): invalid argument: it is Docker's, and corral's containers would mix with that engine's, which manages them as its own; use corral's own (default "corral"), or pass --allow-foreign-namespace (config allow_foreign_namespace: true) if you mean it`},
		{name: "k8s.io from env", env: map[string]string{"CORRAL_NAMESPACE": "k8s.io"},
			want: `namespace "k8s.io" (env CORRAL_NAMESPACE): invalid argument: it is Kubernetes' (the CRI plugin's), and corral's containers would mix with that engine's, which manages them as its own; use corral's own (default "corral"), or pass --allow-foreign-namespace (config allow_foreign_namespace: true) if you mean it`},
		{name: "file allows, flag forbids", files: map[string]string{DefaultPath: "namespace: moby\nallow_foreign_namespace: true\n"},
			flags: map[string]string{KeyAllowForeignNamespace: "false"},
			want:  `namespace "moby" (file /etc/corral/config.yaml): invalid argument: it is Docker's, and corral's containers would mix with that engine's, which manages them as its own; use corral's own (default "corral"), or pass --allow-foreign-namespace (config allow_foreign_namespace: true) if you mean it`},
		{name: "log level", env: map[string]string{"CORRAL_LOG_LEVEL": "loud"},
			want: `log level "loud" (env CORRAL_LOG_LEVEL): invalid argument: want one of debug, info, warn, error`},
		{name: "bad bool", env: map[string]string{"CORRAL_ALLOW_FOREIGN_NAMESPACE": "sure"},
			want: `env CORRAL_ALLOW_FOREIGN_NAMESPACE "sure": invalid argument: want true or false`},
		{name: "relative state dir", flags: map[string]string{KeyStateDir: "state"},
			want: `state directory "state" (flag --state-dir): invalid argument: want an absolute path`},
		{name: "negative max sessions", files: map[string]string{DefaultPath: "max_sessions: -1\n"},
			want: `max-sessions "-1" (file /etc/corral/config.yaml): invalid argument: want a whole number of at least 0`},
		{name: "max connections not a number", env: map[string]string{"CORRAL_MAX_CONNECTIONS": "many"},
			want: `max-connections "many" (env CORRAL_MAX_CONNECTIONS): invalid argument: want a whole number of at least 0`},
		{name: "kept patch bytes not a size", flags: map[string]string{KeyMaxKeptPatchBytes: "lots"},
			want: `max-kept-patch-bytes "lots" (flag --max-kept-patch-bytes): invalid argument: want bytes or a size with a binary unit (256MiB, 1GiB), 0 for no cap`},
		{name: "retention not a duration", env: map[string]string{"CORRAL_KEPT_PATCH_RETENTION": "7d"},
			want: `kept-patch-retention "7d" (env CORRAL_KEPT_PATCH_RETENTION): invalid argument: want a duration (168h, 30m), 0 to keep patches for ever`},
		{name: "max memory not a size", flags: map[string]string{KeyMaxMemory: "8 lots"},
			want: `max-memory "8 lots" (flag --max-memory): invalid argument: want bytes or a size with a binary unit (8GiB, 512MiB), 0 for no cap`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Resolve(Inputs{ConfigPath: tc.cfgPath, Flags: tc.flags, Getenv: envOf(tc.env), ReadFile: files(tc.files)})
			require.EqualError(t, err, tc.want)
			require.True(t, errdefs.IsInvalidArgument(err))
		})
	}
}

// TestResolveDaemonCaps: the daemon's caps come from flags, CORRAL_*
// variables or the file, in that precedence; sizes take units.
func TestResolveDaemonCaps(t *testing.T) {
	file := map[string]string{DefaultPath: "max_sessions: 64\nmax_memory: 8GiB\nmax_connections: 256\n"}
	got, err := Resolve(Inputs{Getenv: envOf(nil), ReadFile: files(file)})
	require.NoError(t, err)
	require.Equal(t, 64, got.MaxSessions)
	require.Equal(t, int64(8<<30), got.MaxMemory)
	require.Equal(t, 256, got.MaxConnections)
	require.Equal(t, "file "+DefaultPath, got.Sources[KeyMaxMemory])

	got, err = Resolve(Inputs{Getenv: envOf(map[string]string{"CORRAL_MAX_MEMORY": "512MiB", "CORRAL_MAX_SESSIONS": "3"}),
		Flags: map[string]string{KeyMaxSessions: "2"}, ReadFile: files(file)})
	require.NoError(t, err)
	require.Equal(t, 2, got.MaxSessions)
	require.Equal(t, int64(512<<20), got.MaxMemory)
	require.Equal(t, "env CORRAL_MAX_MEMORY", got.Sources[KeyMaxMemory])
	require.Equal(t, "flag --max-sessions", got.Sources[KeyMaxSessions])

	got, err = Resolve(Inputs{Getenv: envOf(nil), ReadFile: files(nil)})
	require.NoError(t, err)
	require.Zero(t, got.MaxSessions, "no cap by default")
	require.Zero(t, got.MaxMemory, "no cap by default")
	require.Zero(t, got.MaxConnections, "the daemon's default")

	got, err = Resolve(Inputs{Getenv: envOf(map[string]string{"CORRAL_KEPT_PATCH_RETENTION": "2h"}),
		ReadFile: files(map[string]string{DefaultPath: "max_kept_patch_bytes: 1GiB\nkept_patch_retention: 24h\n"})})
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), got.MaxKeptPatchBytes)
	require.Equal(t, 2*time.Hour, got.KeptPatchRetention)
	require.Equal(t, "env CORRAL_KEPT_PATCH_RETENTION", got.Sources[KeyKeptPatchRetention])
	got, err = Resolve(Inputs{Getenv: envOf(nil), Flags: map[string]string{KeyMaxKeptPatchBytes: "0", KeyKeptPatchRetention: "0"}, ReadFile: files(nil)})
	require.NoError(t, err)
	require.Zero(t, got.MaxKeptPatchBytes, "0: no cap")
	require.Zero(t, got.KeptPatchRetention, "0: kept for ever")
}
