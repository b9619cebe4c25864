// Command daemonclient is a test client of corral's daemon (package
// sandbox/client), run by the integration tests as another uid or as a
// process to kill mid-call. It prints one JSON line: the call's result or
// its error (kind, HTTP status, message).
//
//	daemonclient SOCKET list
//	daemonclient SOCKET create REPO
//	daemonclient SOCKET create-volume NAME [SUBPATH]
//	daemonclient SOCKET patches
//	daemonclient SOCKET patch ID
//	daemonclient SOCKET create-json CREATESESSION-JSON
//	daemonclient SOCKET get|diff|remove ID
//	daemonclient SOCKET exec|stream ID ARGV...
//	daemonclient SOCKET read ID PATH
//	daemonclient SOCKET write ID PATH CONTENT
//	daemonclient SOCKET apply ID TOKEN
//	daemonclient SOCKET review ID
//	daemonclient SOCKET hold N
//
// hold opens N connections, sends GET /v1/version on each and keeps them
// open (idle, kept alive) until its standard input closes; its line is
// printed as soon as every connection has its answer: the statuses.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/corral-sandbox/corral/sandbox/api"
	"github.com/corral-sandbox/corral/sandbox/client"
)

type output struct {
	Result  any    `json:"result,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Status  int    `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: daemonclient SOCKET OP ARGS...")
		os.Exit(2)
	}
	c := client.New(os.Args[1])
	defer c.Close()
	ctx := context.Background()
	op, args := os.Args[2], os.Args[3:]
	if op == "hold" {
		hold(os.Args[1], args[0])
		return
	}
	var res any
	var err error
	switch op {
	case "list":
		res, err = c.Sessions(ctx)
	case "create":
		res, err = c.CreateSession(ctx, api.CreateSession{Repo: args[0]})
	case "create-volume":
		v := &api.Volume{Name: args[0]}
		if len(args) > 1 {
			v.SubPath = args[1]
		}
		res, err = c.CreateSession(ctx, api.CreateSession{Volume: v})
	case "patches":
		res, err = c.Patches(ctx)
	case "patch":
		var b []byte
		b, err = c.PodPatch(ctx, args[0])
		res = string(b)
	case "create-json":
		var req api.CreateSession
		if err = json.Unmarshal([]byte(args[0]), &req); err == nil {
			res, err = c.CreateSession(ctx, req)
		}
	case "get":
		res, err = c.Session(ctx, args[0])
	case "diff":
		res, err = c.Diff(ctx, args[0])
	case "remove":
		res, err = c.RemoveSession(ctx, args[0])
	case "discard":
		res, err = c.DiscardSession(ctx, args[0])
	case "rmpatch":
		res, err = c.RemovePatch(ctx, args[0])
	case "exec":
		res, err = c.Exec(ctx, args[0], args[1:], nil, nil)
	case "stream":
		res, err = c.Exec(ctx, args[0], args[1:], os.Stderr, os.Stderr)
	case "read":
		res, err = c.Read(ctx, args[0], api.Read{Path: args[1]})
	case "write":
		res, err = c.Write(ctx, args[0], api.Write{Path: args[1], Content: args[2]})
	case "apply":
		res, err = c.Apply(ctx, args[0], api.Apply{Approve: []string{args[1]}})
	case "review":
		res, err = c.Apply(ctx, args[0], api.Apply{})
	default:
		fmt.Fprintln(os.Stderr, "unknown op", op)
		os.Exit(2)
	}
	out := output{Result: res}
	if err != nil {
		out = output{Kind: "failed", Message: err.Error()}
		var ce *client.Error
		if errors.As(err, &ce) {
			out.Kind, out.Status = ce.API.Kind, ce.Status
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}

// hold is the op hold: N connections answered and held until stdin
// closes.
func hold(sock, count string) {
	n, err := strconv.Atoi(count)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		os.Exit(2)
	}
	statuses := []int{}
	var conns []net.Conn
	for range n {
		c, err := net.Dial("unix", sock)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hold:", err)
			os.Exit(1)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "GET /v1/version HTTP/1.1\r\nHost: corral\r\n\r\n"); err != nil {
			fmt.Fprintln(os.Stderr, "hold:", err)
			os.Exit(1)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "hold:", err)
			os.Exit(1)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	_ = json.NewEncoder(os.Stdout).Encode(output{Result: statuses})
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		c.Close()
	}
}
