package daemon

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
)

// BenchmarkRequestOverhead is the API's own cost per call, over the unix
// socket with the real server and the Go client, on the fake backend
// (whose calls cost next to nothing): check, and an unstreamed and a
// streamed exec.
func BenchmarkRequestOverhead(b *testing.B) {
	srv, err := NewServer(newFake(), Options{Version: "bench", AdminGID: -1, MaxRunning: 4, QueueWait: time.Second, StateDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	dir, _ := os.MkdirTemp("", "corral-bench-")
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ConnContext: ConnContext}
	go hs.Serve(l)
	defer hs.Close()
	c := client.New(sock)
	defer c.Close()
	ctx := context.Background()
	s, err := c.CreateSession(ctx, api.CreateSession{Repo: dir})
	if err != nil {
		b.Fatal(err)
	}
	fake := srv.b.(*fakeBackend)
	go func() {
		for range fake.execReturned {
		}
	}()
	b.Run("check", func(b *testing.B) {
		for range b.N {
			if _, err := c.Check(ctx, s.ID, []string{"echo", "hi"}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec", func(b *testing.B) {
		for range b.N {
			if _, err := c.Exec(ctx, s.ID, []string{"echo", "hi"}, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("exec-streamed", func(b *testing.B) {
		for range b.N {
			if _, err := c.Exec(ctx, s.ID, []string{"echo", "hi"}, discardW{}, discardW{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discardW struct{}

func (discardW) Write(p []byte) (int, error) { return len(p), nil }
