package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/spf13/cobra"
)

// categories are the errdefs categories as their errors print.
var categories = map[string]error{}

func init() {
	for _, c := range []error{
		errdefs.ErrUnknown, errdefs.ErrInvalidArgument, errdefs.ErrNotFound, errdefs.ErrAlreadyExists,
		errdefs.ErrPermissionDenied, errdefs.ErrResourceExhausted, errdefs.ErrFailedPrecondition,
		errdefs.ErrConflict, errdefs.ErrNotModified, errdefs.ErrAborted, errdefs.ErrOutOfRange,
		errdefs.ErrNotImplemented, errdefs.ErrInternal, errdefs.ErrUnavailable, errdefs.ErrDataLoss,
		errdefs.ErrUnauthenticated,
	} {
		categories[c.Error()] = c
	}
}

// errorLine returns err as the one line the CLI prints (on stderr after
// "corral: ", and as the JSON error's message). Wrapping with errdefs
// categories ("context: %w: detail") leaves the category's text inside
// the message, sometimes twice ("invalid argument: x: invalid argument:
// y"); the category is the JSON error's kind and the exit code, so a
// ": "-separated segment that is exactly the text of a category err
// carries is dropped where more text follows it (the detail says what is
// wrong) and wherever it repeats. A category at the very end, with
// nothing after it ("image x: not found"), is the message and stays.
// Newlines become "; " so the error stays one line.
func errorLine(err error) string {
	segs := strings.Split(err.Error(), ": ")
	seen := map[string]bool{}
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		if c, ok := categories[s]; ok && errors.Is(err, c) {
			if seen[s] || i < len(segs)-1 {
				seen[s] = true
				continue
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return err.Error()
	}
	line := strings.Join(out, ": ")
	line = strings.ReplaceAll(strings.TrimRight(line, "\n"), "\n", "; ")
	return line
}

// checkRepoFlag fails, before anything else runs, when the command's
// --repo names nothing or a file, with the fix.
func checkRepoFlag(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("repo")
	if f == nil || f.Value.String() == "" {
		return nil
	}
	repo := f.Value.String()
	st, err := os.Stat(repo)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageError(fmt.Errorf("repository %s does not exist; pass the root directory of a repository with --repo", repo))
	case err == nil && !st.IsDir():
		return usageError(fmt.Errorf("repository %s is not a directory; pass the root directory of a repository with --repo", repo))
	}
	return nil
}
