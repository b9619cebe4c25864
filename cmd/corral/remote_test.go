package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// fakeDaemon answers the few routes `corral session exec` may use on a
// unix socket and records every request as "METHOD PATH".
type fakeDaemon struct {
	sock   string
	result api.ExecResult

	mu   sync.Mutex
	seen []string
}

func startFakeDaemon(t *testing.T, result api.ExecResult) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{sock: filepath.Join(t.TempDir(), "corral.sock"), result: result}
	ln, err := net.Listen("unix", f.sock)
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/version", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", api.MediaJSON)
		_ = json.NewEncoder(w).Encode(api.VersionInfo{})
	})
	mux.HandleFunc("GET /v1/sessions/{id}/profile", func(w http.ResponseWriter, _ *http.Request) {
		prof, err := profiles.Load(profiles.DefaultName)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		doc, err := yaml.Marshal(prof) // as the daemon answers
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", api.MediaYAML)
		_, _ = w.Write(doc)
	})
	mux.HandleFunc("POST /v1/sessions/{id}/exec", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", api.MediaNDJSON)
		enc := json.NewEncoder(w)
		_ = enc.Encode(api.ExecEvent{Stdout: []byte("a.txt\n")})
		res := f.result
		_ = enc.Encode(api.ExecEvent{Result: &res})
	})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Method+" "+r.URL.Path)
		f.mu.Unlock()
		mux.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return f
}

func (f *fakeDaemon) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// TestSessionExecThroughDaemonIsOneExchange pins what `corral session
// exec` costs through a daemon: a version probe and the exec, nothing
// else: no profile fetched and parsed unless the call hit a limit, and
// containerd never dialed (CONTAINERD_ADDRESS points at nothing; a dial
// would fail the command), no state directory made.
func TestSessionExecThroughDaemonIsOneExchange(t *testing.T) {
	t.Setenv("CONTAINERD_ADDRESS", filepath.Join(t.TempDir(), "no-containerd.sock"))
	conf := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(conf, []byte("{}\n"), 0o644))
	t.Setenv("CORRAL_CONFIG", conf)
	ok := api.ExecResult{Argv: []string{"ls"}, LimitsHit: []string{}, Changes: []api.Change{}, Violations: []api.Problem{}, NewViolations: []api.Problem{}}
	f := startFakeDaemon(t, ok)
	var stdout, stderr bytes.Buffer
	state := filepath.Join(t.TempDir(), "state")
	code := execute(context.Background(), []string{"--daemon", f.sock, "--state-dir", state,
		"session", "exec", "-q", "s1", "--", "ls"}, nil, &stdout, &stderr)
	require.Equal(t, 0, code, stderr.String())
	require.NoDirExists(t, state, "a client of the daemon makes no state of its own")
	require.Equal(t, "a.txt\n", stdout.String())
	require.Equal(t, []string{"GET /v1/version", "POST /v1/sessions/s1/exec"}, f.requests())

	// A call that hit a limit: the line quotes the session's profile,
	// fetched then.
	hit := ok
	hit.ExitCode, hit.LimitsHit = 137, []string{sandbox.LimitTimeout}
	f = startFakeDaemon(t, hit)
	stdout.Reset()
	stderr.Reset()
	code = execute(context.Background(), []string{"--daemon", f.sock, "session", "exec", "s1", "--", "ls"}, nil, &stdout, &stderr)
	require.Equal(t, exitLimit, code, stderr.String())
	prof, err := profiles.Load(profiles.DefaultName)
	require.NoError(t, err)
	require.Contains(t, stderr.String(), "corral: limit hit: "+describeLimit(sandbox.LimitTimeout, prof)+"\n")
	require.Equal(t, []string{"GET /v1/version", "POST /v1/sessions/s1/exec", "GET /v1/sessions/s1/profile"}, f.requests())
}
