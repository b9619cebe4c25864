package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
	"github.com/corral-sandbox/corral/audit"
	"github.com/corral-sandbox/corral/internal/initctl"
	"github.com/corral-sandbox/corral/sandbox/fsop"
)

// The file tools (Read, List, Glob, Search, Write, Edit) run inside a fresh
// container of the session, like commands, through corral-init's fs mode
// (package sandbox/fsop), which every container has whatever its image:
// the kernel boundary holds for them exactly as for commands. Before anything runs, the host applies the
// policy:
//
//   - every path is canonicalized and checked against the view
//     (allowlist.CheckRead) or the view and the write scope
//     (allowlist.CheckWrite): a direct reference to a hidden or
//     out-of-scope path is refused with a *allowlist.Refusal naming the
//     rule, so an empty result is never mistaken for permission;
//   - discovery (List, Glob, Search) shows no hidden path: the container
//     does not have them, and the host drops any result the view hides
//     (for instance a file the agent created under an ignored name);
//   - a glob is refused when it is root-wide or aimed at .git (see
//     fsop.RootWide, fsop.TargetsGit), and when its fixed leading
//     directory is hidden;
//   - ignore files and git control files are never written, and content is
//     text (UTF-8, no NUL) of at most fsop.MaxWriteBytes: the change set
//     would reject anything else.
//
// Content and edit texts never travel in argv: they are staged in the
// session's control directory, bound read-only into the container.

// FileError is a file tool that ran and failed inside the container (the
// file does not exist, the revision is stale, the kernel refused a write).
// It unwraps to an errdefs category.
type FileError struct {
	Op   string
	Path string
	// Code is one of the fsop.Code* constants.
	Code    string
	Message string
}

func (e *FileError) Error() string { return e.Op + ": " + e.Message }

// Unwrap returns the errdefs category of Code.
func (e *FileError) Unwrap() error {
	switch e.Code {
	case fsop.CodeNotFound:
		return errdefs.ErrNotFound
	case fsop.CodeConflict:
		return errdefs.ErrConflict
	case fsop.CodeReadOnly, fsop.CodePermission, fsop.CodeSymlink, fsop.CodeEscapes, fsop.CodeNotContainer:
		return errdefs.ErrPermissionDenied
	case fsop.CodeNoSpace:
		return errdefs.ErrResourceExhausted
	case fsop.CodeNoMatch, fsop.CodeAmbiguous:
		return errdefs.ErrFailedPrecondition
	case fsop.CodeIO:
		return errdefs.ErrUnknown
	}
	return errdefs.ErrInvalidArgument
}

// ReadOptions select a window of a file: Offset and Limit count lines, or
// bytes with Bytes. Zero values mean the defaults (from the start;
// fsop.DefaultReadLines lines or fsop.MaxReadBytes bytes).
type ReadOptions struct {
	Offset int64
	Limit  int64
	Bytes  bool
}

// SearchOptions shape a search: Include is a base-name glob ("*.go"),
// MaxResults bounds the matches (0: fsop.DefaultMatches).
type SearchOptions struct {
	Include    string
	IgnoreCase bool
	MaxResults int
}

// Read returns a window of the file at unsafePath: at most 256 KiB, by
// default 2000 lines; a binary file is reported, not shown. The result's
// SHA256 is the revision Edit expects.
func (s *Session) Read(ctx context.Context, unsafePath string, o ReadOptions) (_ *fsop.ReadResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "read", unsafePath, retErr) }()
	p, err := allowlist.CheckRead(s.view, unsafePath)
	if err != nil {
		return nil, err
	}
	if o.Offset < 0 || o.Limit < 0 {
		return nil, fmt.Errorf("read: %w: offset and limit may not be negative", errdefs.ErrInvalidArgument)
	}
	argv := []string{"read", "--offset", strconv.FormatInt(o.Offset, 10), "--limit", strconv.FormatInt(o.Limit, 10)}
	if o.Bytes {
		argv = append(argv, "--bytes")
	}
	argv = append(argv, "--max-output", strconv.Itoa(s.helperOutput()), "--", p)
	var res fsop.ReadResult
	if err := s.runHelper(ctx, "read", p, argv, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// List returns the entries of the directory at unsafePath ("." for the
// repository root), hidden ones never included.
func (s *Session) List(ctx context.Context, unsafePath string) (_ *fsop.ListResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "list", unsafePath, retErr) }()
	p, err := allowlist.CheckRead(s.view, unsafePath)
	if err != nil {
		return nil, err
	}
	var res fsop.ListResult
	if err := s.runHelper(ctx, "list", p, []string{"list", "--max-output", strconv.Itoa(s.helperOutput()), "--", p}, &res); err != nil {
		return nil, err
	}
	res.Entries = s.visible(res.Entries)
	return &res, nil
}

// Glob returns the entries matching pattern (syntax in sandbox/fsop), at
// most max (0: fsop.DefaultMatches), hidden ones never included. Refused:
// patterns that are not canonical relative paths, root-wide globs, globs
// aimed at .git, and globs whose fixed leading directory is hidden.
func (s *Session) Glob(ctx context.Context, pattern string, max int) (_ *fsop.GlobResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "glob", pattern, retErr) }()
	refuse := func(rule string) error {
		return &allowlist.Refusal{Kind: allowlist.KindPath, Index: -1, Token: clipToken(pattern), Rule: rule}
	}
	clean, err := allowlist.CleanPath(pattern)
	if err != nil {
		return nil, err
	}
	if clean != pattern {
		return nil, refuse("glob is not a canonical relative pattern (no '.', '..', empty or trailing components); use " + strconv.Quote(clean))
	}
	if r := fsop.CheckGlobSyntax(pattern); r != "" {
		return nil, fmt.Errorf("glob %q: %w: %s", pattern, errdefs.ErrInvalidArgument, r)
	}
	if fsop.RootWide(pattern) {
		return nil, refuse("root-wide glob: a ** pattern must name something (such as **/*.md) or start in a directory (such as src/**)")
	}
	if fsop.TargetsGit(pattern) {
		return nil, refuse(".git is hidden at any depth; globs aimed at it are refused")
	}
	comps, literal := fsop.SplitGlob(pattern)
	if literal > 0 {
		if _, err := allowlist.CheckRead(s.view, strings.Join(comps[:literal], "/")); err != nil {
			var r *allowlist.Refusal
			if errors.As(err, &r) {
				return nil, refuse(r.Rule)
			}
			return nil, err
		}
	}
	if max < 0 {
		return nil, fmt.Errorf("glob: %w: negative limit", errdefs.ErrInvalidArgument)
	}
	var res fsop.GlobResult
	if err := s.runHelper(ctx, "glob", pattern, []string{"glob", "--max", strconv.Itoa(max), "--max-output", strconv.Itoa(s.helperOutput()), "--", pattern}, &res); err != nil {
		return nil, err
	}
	res.Matches = s.visible(res.Matches)
	return &res, nil
}

// MaxRegexpBytes bounds a search's regular expression.
const MaxRegexpBytes = fsop.MaxPatternBytes

// Search returns the lines matching the regular expression expr (Go RE2
// syntax: no backtracking blow-up) in the file or below the directory at
// unsafePath ("." for the whole view), hidden files never included.
func (s *Session) Search(ctx context.Context, expr, unsafePath string, o SearchOptions) (_ *fsop.SearchResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "search", unsafePath, retErr) }()
	p, err := allowlist.CheckRead(s.view, unsafePath)
	if err != nil {
		return nil, err
	}
	switch {
	case expr == "":
		return nil, fmt.Errorf("search: %w: empty regular expression", errdefs.ErrInvalidArgument)
	case len(expr) > MaxRegexpBytes:
		return nil, fmt.Errorf("search: %w: regular expression longer than %d bytes", errdefs.ErrInvalidArgument, MaxRegexpBytes)
	case strings.IndexByte(expr, 0) >= 0 || !utf8.ValidString(expr):
		return nil, fmt.Errorf("search: %w: regular expression holds NUL or invalid UTF-8", errdefs.ErrInvalidArgument)
	}
	if _, err := regexp.Compile(expr); err != nil {
		return nil, fmt.Errorf("search: %w: %v", errdefs.ErrInvalidArgument, err)
	}
	if o.Include != "" {
		if _, err := path.Match(o.Include, ""); err != nil || strings.ContainsAny(o.Include, "/\x00") {
			return nil, fmt.Errorf("search: %w: include %q: want a base-name glob such as *.go", errdefs.ErrInvalidArgument, o.Include)
		}
	}
	if o.MaxResults < 0 {
		return nil, fmt.Errorf("search: %w: negative limit", errdefs.ErrInvalidArgument)
	}
	argv := []string{"search", "--max", strconv.Itoa(o.MaxResults), "--max-output", strconv.Itoa(s.helperOutput())}
	if o.Include != "" {
		argv = append(argv, "--include", o.Include)
	}
	if o.IgnoreCase {
		argv = append(argv, "--ignore-case")
	}
	argv = append(argv, "--", expr, p)
	var res fsop.SearchResult
	if err := s.runHelper(ctx, "search", p, argv, &res); err != nil {
		return nil, err
	}
	res.Pattern = expr
	kept := res.Matches[:0]
	for _, m := range res.Matches {
		if _, hidden := s.view.Hidden(m.Path); !hidden {
			kept = append(kept, m)
		}
	}
	res.Matches = kept
	return &res, nil
}

// Write replaces or creates the file at unsafePath with content (UTF-8
// text, at most fsop.MaxWriteBytes). With expectedSHA256 set, the file
// must exist with that revision (else a FileError of fsop.CodeConflict).
// Missing parent directories inside the write scope are created.
func (s *Session) Write(ctx context.Context, unsafePath string, content []byte, expectedSHA256 string) (_ *fsop.WriteResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "write", unsafePath, retErr) }()
	p, err := s.checkWrite(unsafePath)
	if err != nil {
		return nil, err
	}
	if err := checkText("content", content); err != nil {
		return nil, err
	}
	if expectedSHA256 != "" {
		if err := checkSHA256(expectedSHA256); err != nil {
			return nil, err
		}
	}
	// The store's lock below needs the store.
	if err := s.ready(); err != nil {
		return nil, err
	}
	unlock, err := s.lockWrites()
	if err != nil {
		return nil, err
	}
	defer unlock()
	staged, cleanup, err := s.stage(content)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	argv := []string{"write", "--content", staged}
	if expectedSHA256 != "" {
		argv = append(argv, "--expect-sha256", expectedSHA256)
	}
	argv = append(argv, "--", p)
	var res fsop.WriteResult
	if err := s.runHelper(ctx, "write", p, argv, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Edit replaces oldText by newText in the file at unsafePath, whose
// current sha256 must be expectedSHA256 (a stale revision is a FileError
// of fsop.CodeConflict). oldText must occur exactly once, or, with all, at
// least once.
func (s *Session) Edit(ctx context.Context, unsafePath, oldText, newText, expectedSHA256 string, all bool) (_ *fsop.WriteResult, retErr error) {
	defer func() { retErr = s.auditFileRefusal(ctx, "edit", unsafePath, retErr) }()
	p, err := s.checkWrite(unsafePath)
	if err != nil {
		return nil, err
	}
	if oldText == "" {
		return nil, fmt.Errorf("edit: %w: the old text is empty", errdefs.ErrInvalidArgument)
	}
	for _, t := range []struct{ what, text string }{{"old text", oldText}, {"new text", newText}} {
		if err := checkText(t.what, []byte(t.text)); err != nil {
			return nil, err
		}
	}
	if err := checkSHA256(expectedSHA256); err != nil {
		return nil, err
	}
	// The store's lock below needs the store.
	if err := s.ready(); err != nil {
		return nil, err
	}
	unlock, err := s.lockWrites()
	if err != nil {
		return nil, err
	}
	defer unlock()
	oldFile, cleanOld, err := s.stage([]byte(oldText))
	if err != nil {
		return nil, err
	}
	defer cleanOld()
	newFile, cleanNew, err := s.stage([]byte(newText))
	if err != nil {
		return nil, err
	}
	defer cleanNew()
	argv := []string{"edit", "--old", oldFile, "--new", newFile, "--expect-sha256", expectedSHA256}
	if all {
		argv = append(argv, "--all")
	}
	argv = append(argv, "--", p)
	var res fsop.WriteResult
	if err := s.runHelper(ctx, "edit", p, argv, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// checkWrite is the write policy of the file tools: allowlist.CheckWrite,
// which also refuses ignore files and git control files (names.Reserved):
// the hidden set was computed from them when the session started.
func (s *Session) checkWrite(unsafePath string) (string, error) {
	return allowlist.CheckWrite(s.view, s.Scope, unsafePath)
}

func checkText(what string, b []byte) error {
	switch {
	case len(b) > fsop.MaxWriteBytes:
		return fmt.Errorf("%s: %w: %d bytes, at most %d", what, errdefs.ErrInvalidArgument, len(b), fsop.MaxWriteBytes)
	case strings.IndexByte(string(b), 0) >= 0 || !utf8.Valid(b):
		return fmt.Errorf("%s: %w: not UTF-8 text (a NUL byte or invalid UTF-8); the change set accepts text only", what, errdefs.ErrInvalidArgument)
	}
	return nil
}

var sha256Pattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

func checkSHA256(h string) error {
	if !sha256Pattern.MatchString(h) {
		return fmt.Errorf("expected sha256 %q: %w: want 64 lower-case hex digits, the sha256 that read returned", h, errdefs.ErrInvalidArgument)
	}
	return nil
}

func clipToken(s string) string {
	if len(s) <= 256 {
		return s
	}
	cut := 256
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// visible drops entries the view hides.
func (s *Session) visible(entries []fsop.Entry) []fsop.Entry {
	kept := entries[:0]
	for _, e := range entries {
		if _, hidden := s.view.Hidden(e.Path); !hidden {
			kept = append(kept, e)
		}
	}
	if kept == nil {
		kept = []fsop.Entry{}
	}
	return kept
}

// helperOutput is the bound the helper keeps its answer under: the
// profile's output cap, less room for the envelope.
func (s *Session) helperOutput() int {
	return int(max(s.limits.OutputBytes-4096, 1024))
}

// lockWrites serializes the session's file-tool writes, in this process
// and across processes (fileMu, then the store's lock: see the lock order
// in the package comment).
func (s *Session) lockWrites() (func(), error) {
	s.fileMu.Lock()
	unlock, err := s.store.lock()
	if err != nil {
		s.fileMu.Unlock()
		return nil, err
	}
	return func() { unlock(); s.fileMu.Unlock() }, nil
}

// stage writes data to a new file in the session's control directory and
// returns its path in the container and a function that removes it.
func (s *Session) stage(data []byte) (string, func(), error) {
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", nil, err
	}
	name := "in-" + hex.EncodeToString(id[:])
	host := filepath.Join(s.layout.Ctl, name)
	f, err := os.OpenFile(host, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", nil, fmt.Errorf("staging content: %w", err)
	}
	cleanup := func() { _ = os.Remove(host) }
	if _, err := f.Write(data); err != nil {
		f.Close()
		cleanup()
		return "", nil, fmt.Errorf("staging content: %w", err)
	}
	if err := f.Close(); err != nil {
		cleanup()
		return "", nil, fmt.Errorf("staging content: %w", err)
	}
	return path.Join(initctl.CtlDir, name), cleanup, nil
}

// runHelper runs one file-tool operation (argv, corral's own and trusted:
// it bypasses the allowlist) through corral-init's fs mode in a fresh
// container of the session and decodes its answer into out.
func (s *Session) runHelper(ctx context.Context, op, p string, argv []string, out any) error {
	res, err := s.call(ctx, initctl.Request{Mode: initctl.FS, Argv: argv}, nil, nil)
	if err != nil {
		return s.auditFailed(ctx, []string{op, p}, res, fmt.Errorf("%s: %w", op, err))
	}
	if err := s.auditOutcome(ctx, op+" ran", audit.Ran([]string{op, p}, res.ExitCode, res.Duration, res.LimitsHit)); err != nil {
		return err
	}
	if res.Killed() {
		return fmt.Errorf("%s %s: %w: limit hit: %s", op, p, errdefs.ErrResourceExhausted, strings.Join(res.LimitsHit, ", "))
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("%s %s: the file helper failed (exit %d): %s", op, p, res.ExitCode, strings.TrimSpace(clipToken(string(res.Stderr))))
	}
	var resp fsop.Response
	if err := json.Unmarshal(res.Stdout, &resp); err != nil {
		return fmt.Errorf("%s %s: reading the file helper's answer: %w", op, p, err)
	}
	if resp.Error != nil {
		return &FileError{Op: op, Path: p, Code: resp.Error.Code, Message: resp.Error.Message}
	}
	if err := json.Unmarshal(resp.Result, out); err != nil {
		return fmt.Errorf("%s %s: reading the file helper's answer: %w", op, p, err)
	}
	return nil
}

// auditFileRefusal records a file tool call that the policy refused.
func (s *Session) auditFileRefusal(ctx context.Context, op, unsafePath string, err error) error {
	var r *allowlist.Refusal
	if errors.As(err, &r) {
		return s.auditRefusal(ctx, op, []string{op, unsafePath}, err)
	}
	return err
}
