package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-sandbox/corral/internal/mcpserver"
	"github.com/corral-sandbox/corral/profiles"
	"github.com/corral-sandbox/corral/sandbox"
	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func newServeCommand(g *globalFlags) *cobra.Command {
	cf := &capFlags{}
	var mcpMode bool
	var sessionID string
	cmd := &cobra.Command{
		Use:   "serve --mcp (--session ID | --repo DIR [--profile NAME] [--scope DIR | --page PATH | --agent-id ID] [--read-only])",
		Short: "Serve one session to an agent over MCP on stdio",
		Long: `Serves one session to an MCP client on stdin/stdout, with the tools list,
read, search, glob, write, edit (absent in a read-only session), exec and diff.
The launcher's flags fix the session: --session re-opens a persistent one
(corral session create), otherwise a new persistent session is created from
--repo, --profile and the scope flags and its id is printed on stderr. No
tool chooses a repository, profile, scope, agent or session. When the client
disconnects (closes stdin or stdout) the server ends with exit 0. A session
given with --session stays, with what it wrote (see 'corral session diff'
and 'corral session rm'). A session the server made from --repo ends with
it: it is removed, and its change set, unless empty, is kept as the patch
file STATE-DIR/patches/ID.patch, named on stderr (never silently lost); if
the server is killed instead, the session expires after its idle TTL and
'corral session prune' keeps its change set the same way.

Messages are JSON-RPC 2.0, one per line, at most 16 MiB and 64 levels deep;
a line that is not one is answered with a JSON-RPC error (-32700 parse
error, -32600 invalid request) and the server goes on serving.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !mcpMode {
				return usageError(errors.New("only --mcp (MCP over stdio) is implemented"))
			}
			ctx := cmd.Context()
			stderr := cmd.ErrOrStderr()
			// A client that closes stdout must end the server through its
			// cleanup: with SIGPIPE notified, a write to the closed pipe
			// fails with EPIPE instead of killing the process.
			sigpipe := make(chan os.Signal, 1)
			signal.Notify(sigpipe, syscall.SIGPIPE)
			defer signal.Stop(sigpipe)
			if sessionID != "" && (cf.repo != "" || cf.scope != "" || cf.page != "" || cf.agentID != "" || cf.readOnly || cmd.Flags().Changed("profile")) {
				return usageError(errors.New("--session excludes --repo, --profile, --scope, --page, --agent-id and --read-only: the session's capability was fixed when it was created"))
			}
			c, err := g.daemonClient(cmd)
			if err != nil {
				return err
			}
			if c != nil {
				defer c.Close()
				return serveRemote(cmd, c, cf, sessionID)
			}
			if sessionID == "" {
				if err := g.checkPlacement(cf.repo); err != nil {
					return err
				}
			}
			cfg := g.config(stderr)
			cfg.Cold = false // a server prepares each next container before the call
			cfg.ReapCgroup = sandbox.DefaultReapCgroup
			exec, err := sandbox.New(ctx, cfg)
			if err != nil {
				return &exitError{code: exitFailed, err: err}
			}
			defer exec.Close()
			var sess *sandbox.Session
			made := false
			if sessionID != "" {
				if sess, err = exec.OpenSession(ctx, sessionID); err != nil {
					return &exitError{code: exitFailed, err: err}
				}
			} else {
				cfg, source, err := cf.config()
				if err != nil {
					return err
				}
				if sess, err = exec.CreateSession(ctx, cfg, source); err != nil {
					return refusalOr(err)
				}
				made = true
			}
			defer sess.Close()
			if made {
				// Runs after sess.Close (deferred later, run earlier).
				defer func() {
					ended, err := exec.EndSession(context.Background(), sess.ID)
					if err != nil {
						fmt.Fprintf(stderr, "corral: ending session %s: %v\n", sess.ID, err)
						return
					}
					fmt.Fprintf(stderr, "corral: %s\n", describeEnded(ended))
				}()
				defer sess.Close()
			}
			return serveMCP(cmd, mcpserver.New(sess, mcpOptions(sess.Record(), sess.Profile)), sess.Record())
		},
	}
	cmd.Flags().BoolVar(&mcpMode, "mcp", false, "speak MCP (JSON-RPC) on stdin/stdout")
	cmd.Flags().StringVar(&sessionID, "session", "", "serve this persistent session (corral session create)")
	cf.add(cmd.Flags())
	cmd.Flags().Lookup("repo").Usage = "repository root (required without --session)"
	return cmd
}

// serveRemote serves a session of corral's daemon: sessionID, or one it
// creates from cf.
func serveRemote(cmd *cobra.Command, c *client.Client, cf *capFlags, sessionID string) error {
	ctx := cmd.Context()
	var s *api.Session
	var err error
	if sessionID != "" {
		if s, err = c.Session(ctx, sessionID); err != nil {
			return &exitError{code: exitFailed, err: err}
		}
	} else {
		cfg, source, err := cf.config()
		if err != nil {
			return err
		}
		req, err := createRequest(cfg, source, "")
		if err != nil {
			return err
		}
		if s, err = c.CreateSession(ctx, req); err != nil {
			return refusalOr(err)
		}
		// A session the server made ends with it, its change set kept
		// as a patch, as standalone.
		id, stderr := s.ID, cmd.ErrOrStderr()
		defer func() {
			rm, err := c.RemoveSession(context.WithoutCancel(ctx), id)
			if err != nil {
				fmt.Fprintf(stderr, "corral: ending session %s: %v\n", id, err)
				return
			}
			fmt.Fprintf(stderr, "corral: %s\n", describeEnded(endedOf(rm)))
		}()
	}
	prof, err := remoteProfile(ctx, c, s.ID)
	if err != nil {
		return &exitError{code: exitFailed, err: err}
	}
	rec := recordOf(s)
	return serveMCP(cmd, mcpserver.NewWith(&remoteSession{c: c, id: s.ID}, mcpOptions(&rec, prof)), &rec)
}

// mcpOptions describe the session rec to the agent.
func mcpOptions(rec *sandbox.SessionRecord, prof *profiles.Profile) mcpserver.Options {
	return mcpserver.Options{Version: sandbox.Version(), ReadOnly: rec.ReadOnly, Scope: scopeText(rec), Commands: prof.Commands}
}

func scopeText(rec *sandbox.SessionRecord) string {
	if rec.ReadOnly {
		return "nothing (read-only)"
	}
	return rec.Scope
}

// serveMCP serves srv on stdio until the client goes.
func serveMCP(cmd *cobra.Command, srv *mcp.Server, rec *sandbox.SessionRecord) error {
	ctx, stderr := cmd.Context(), cmd.ErrOrStderr()
	fmt.Fprintf(stderr, "corral: serving session %s over MCP (repository %s, profile %s, writable: %s)\n", rec.ID, rec.Repo, rec.ProfileName, scopeText(rec))
	err := srv.Run(ctx, mcpserver.Stdio())
	switch {
	case err == nil, ctx.Err() != nil:
	case clientGone(err):
		fmt.Fprintln(stderr, "corral: the client closed the connection")
	default:
		return &exitError{code: exitFailed, err: fmt.Errorf("serving MCP: %w", err)}
	}
	return nil
}

// clientGone reports whether err means the MCP client went away: its end
// of stdin or stdout is closed.
func clientGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, os.ErrClosed)
}
