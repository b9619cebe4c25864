package fsop

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/corral-sandbox/corral/internal/initctl"
)

// Usage is the helper's command line, as the host builds it. corral-init
// runs it in fs mode (the control file's argv is what follows `corral
// fs`); `corral fs` runs the same for images that hold corral itself.
const Usage = `corral fs read [--offset N] [--limit N] [--bytes] [--max-output N] -- PATH
corral fs list [--max N] [--max-output N] -- PATH
corral fs glob [--max N] [--max-output N] -- PATTERN
corral fs search [--include GLOB] [--ignore-case] [--max N] [--max-output N] -- REGEX PATH
corral fs write --content FILE [--expect-sha256 HEX] -- PATH
corral fs edit --old FILE --new FILE --expect-sha256 HEX [--all] -- PATH`

// Main runs one operation (args: OP [flags] -- ARG...) inside a container:
// the paths are relative to the working directory, which the container's
// spec sets to the repository view's mount point, and the answer is one
// JSON Response on stdout. It returns the exit status: 0 when a Response
// was printed (success or failure of the operation), 2 for a malformed
// command line. It refuses to run unless it is the container's first
// process (corral-init's fs mode, PID 1) or runs beside corral-init's bind
// at initctl.InitPath (the tool corral-init started), so that nobody runs it
// on the host by mistake.
func Main(args []string, stdout, stderr io.Writer) int {
	if !inContainer() {
		return respond(stdout, nil, errorf(CodeNotContainer, "corral fs runs only inside a corral container, as its first process"))
	}
	return run(".", args, stdout, stderr)
}

// inContainer reports whether this process is PID 1 or runs where
// corral-init is bound at initctl.InitPath (a regular file; the host has
// none). It asks neither /proc (the tool's Landlock domain refuses PID 1's
// entries) nor getppid(2) (the seccomp allowlist has no use for it); stat(2)
// is neither Landlock-controlled nor refused.
func inContainer() bool {
	if os.Getpid() == 1 {
		return true
	}
	st, err := os.Stat(initctl.InitPath)
	return err == nil && st.Mode().IsRegular()
}

func run(root string, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage:\n"+Usage)
		return 2
	}
	op := args[0]
	fl := flag.NewFlagSet("corral fs "+op, flag.ContinueOnError)
	fl.SetOutput(stderr)
	var (
		offset, limit            int64
		bytesMode, ignoreCase    bool
		all                      bool
		maxOut, maxN             int
		include, content         string
		oldFile, newFile, expect string
	)
	operands := 1
	switch op {
	case "read":
		fl.Int64Var(&offset, "offset", 0, "lines (or bytes) to skip")
		fl.Int64Var(&limit, "limit", 0, "lines (or bytes) to return")
		fl.BoolVar(&bytesMode, "bytes", false, "offset and limit count bytes")
		fl.IntVar(&maxOut, "max-output", 0, "bound on the encoded response")
	case "list", "glob":
		fl.IntVar(&maxN, "max", 0, "bound on the entries returned")
		fl.IntVar(&maxOut, "max-output", 0, "bound on the encoded response")
	case "search":
		fl.StringVar(&include, "include", "", "base-name glob of the files to search")
		fl.BoolVar(&ignoreCase, "ignore-case", false, "case-insensitive")
		fl.IntVar(&maxN, "max", 0, "bound on the matches returned")
		fl.IntVar(&maxOut, "max-output", 0, "bound on the encoded response")
		operands = 2
	case "write":
		fl.StringVar(&content, "content", "", "staged file holding the content")
		fl.StringVar(&expect, "expect-sha256", "", "the file's current sha256")
	case "edit":
		fl.StringVar(&oldFile, "old", "", "staged file holding the old text")
		fl.StringVar(&newFile, "new", "", "staged file holding the new text")
		fl.StringVar(&expect, "expect-sha256", "", "the file's current sha256")
		fl.BoolVar(&all, "all", false, "replace every occurrence")
	default:
		fmt.Fprintf(stderr, "corral fs: unknown operation %q\nusage:\n%s\n", op, Usage)
		return 2
	}
	if err := fl.Parse(args[1:]); err != nil {
		return 2
	}
	if fl.NArg() != operands {
		fmt.Fprintf(stderr, "corral fs %s: want %d operand(s) after --\nusage:\n%s\n", op, operands, Usage)
		return 2
	}
	fsys, err := Open(root)
	if err != nil {
		return respond(stdout, nil, err)
	}
	defer fsys.Close()
	var res any
	switch op {
	case "read":
		res, err = fsys.Read(fl.Arg(0), ReadOptions{Offset: offset, Limit: limit, Bytes: bytesMode, MaxOutput: maxOut})
	case "list":
		var l *ListResult
		if l, err = fsys.List(fl.Arg(0), maxN); err == nil {
			fitEntries(l, &l.Entries, &l.Truncated, maxOut)
		}
		res = l
	case "glob":
		var g *GlobResult
		if g, err = fsys.Glob(fl.Arg(0), maxN); err == nil {
			fitEntries(g, &g.Matches, &g.Truncated, maxOut)
		}
		res = g
	case "search":
		res, err = fsys.Search(fl.Arg(0), fl.Arg(1), SearchOptions{Include: include, IgnoreCase: ignoreCase, MaxResults: maxN, MaxOutput: maxOut})
	case "write":
		var data []byte
		if data, err = readStaged(content, MaxWriteBytes); err == nil {
			res, err = fsys.Write(fl.Arg(0), data, expect)
		}
	case "edit":
		var o, n []byte
		if o, err = readStaged(oldFile, MaxWriteBytes); err == nil {
			if n, err = readStaged(newFile, MaxWriteBytes); err == nil {
				res, err = fsys.Edit(fl.Arg(0), o, n, expect, all)
			}
		}
	}
	return respond(stdout, res, err)
}

func respond(stdout io.Writer, res any, err error) int {
	var r Response
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = errorf(CodeIO, "%v", err)
		}
		r.Error = e
	} else {
		b, merr := json.Marshal(res)
		if merr != nil {
			r.Error = errorf(CodeIO, "encoding the result: %v", merr)
		} else {
			r.Result = b
		}
	}
	_ = json.NewEncoder(stdout).Encode(r)
	return 0
}

// fitEntries drops entries from the end of *entries until the encoded v
// fits max bytes (0: no bound), and marks it truncated.
func fitEntries(v any, entries *[]Entry, truncated *bool, max int) {
	for max > 0 && len(*entries) > 0 && encodedLen(v) > max {
		*entries = (*entries)[:len(*entries)/2]
		*truncated = true
	}
}
