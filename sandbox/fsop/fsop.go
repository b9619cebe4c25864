// Package fsop is the half of corral's file tools (read, list, glob,
// search, write, edit) that runs inside the session's container, as
// corral-init's fs mode (or the corral binary's hidden `corral fs`
// subcommand in an image that holds corral), so that the kernel
// boundary (the read-only view without the hidden paths, the one writable
// mount, uid 65534, seccomp, limits) holds for the file tools exactly as
// for commands.
//
// The host side (sandbox's Session.Read, Write, …) applies the policy
// first: paths are canonicalized and checked against the view and the
// write scope, globs are refused when root-wide or aimed at .git, content
// is checked to be text. What runs here checks only what it needs to do
// its job well: it resolves every path beneath the repository root
// through internal/rootfs (reads under Beneath, writes under NoSymlinks),
// and bounds what it reads and prints. It is cgo-free: corral-init links
// it statically.
// Its answer is one JSON Response on stdout.
//
// Content to write never travels through argv (an argument is limited to
// 128 KiB): the host stages it in files of the session's control
// directory, bound read-only into the container, and passes their paths.
package fsop

import (
	"encoding/json"
	"fmt"
)

// Limits of the file tools. The host may ask for less, never for more.
const (
	// MaxReadBytes bounds the content one read returns.
	MaxReadBytes = 256 << 10
	// DefaultReadLines is the number of lines a read returns by default.
	DefaultReadLines = 2000
	// MaxHashBytes bounds the files whose sha256 a read computes; larger
	// files cannot be edited (they could not be collected either).
	MaxHashBytes = 8 << 20
	// MaxWriteBytes bounds the content of a write and the size of an
	// edited file (the change set refuses larger files).
	MaxWriteBytes = 8 << 20
	// MaxEntries bounds a list.
	MaxEntries = 2000
	// MaxMatches bounds glob and search results.
	MaxMatches = 2000
	// DefaultMatches is the glob and search limit when none is given.
	DefaultMatches = 200
	// MaxScan bounds the directory entries one glob or search visits.
	MaxScan = 200000
	// MaxSearchFileBytes bounds the files a search reads; larger ones are
	// skipped and counted.
	MaxSearchFileBytes = 4 << 20
	// MaxMatchText bounds the text of one search match, in bytes.
	MaxMatchText = 300
	// MaxPatternBytes bounds a search's regular expression and a glob.
	MaxPatternBytes = 4096
	// sniffBytes is how much of a file decides whether it is binary.
	sniffBytes = 8192
)

// Error codes of a failed operation.
const (
	CodeNotFound     = "not_found"      // the path does not exist (in the view)
	CodeIsDir        = "is_a_directory" // a file was expected
	CodeNotDir       = "not_a_directory"
	CodeNotFile      = "not_a_file" // a device, fifo, socket
	CodeSymlink      = "symlink"    // a write or edit through a symbolic link
	CodeReadOnly     = "read_only"  // the kernel refused the write (EROFS)
	CodePermission   = "permission" // EACCES, EPERM
	CodeNoSpace      = "no_space"   // the write area is full
	CodeConflict     = "conflict"   // the expected sha256 is stale
	CodeNoMatch      = "no_match"   // edit: the old text is not in the file
	CodeAmbiguous    = "ambiguous"  // edit: the old text occurs more than once
	CodeTooLarge     = "too_large"  // beyond a limit above
	CodeBinary       = "binary"     // edit of a binary file
	CodeInvalid      = "invalid"    // a malformed request
	CodeEscapes      = "escapes"    // resolution left the repository root
	CodeIO           = "io"         // anything else
	CodeNotContainer = "not_container"
)

// Error is a failed operation.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *Error) Error() string { return e.Message }

func errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Response is what `corral fs` prints: exactly one of Result and Error.
type Response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Entry is one directory entry or glob match. Type is "file", "dir",
// "symlink" or "other"; Size is set for files by list.
type Entry struct {
	Path string `json:"path"`
	Type string `json:"type"`
	Size int64  `json:"size,omitempty"`
}

// ReadOptions select a window of a file. Offset and Limit count lines
// (the default) or, with Bytes, bytes. A zero Limit means the default
// (DefaultReadLines lines, or MaxReadBytes bytes); content is never longer
// than MaxReadBytes. MaxOutput, when set, bounds the encoded Response.
type ReadOptions struct {
	Offset    int64
	Limit     int64
	Bytes     bool
	MaxOutput int
}

// ReadResult is a window of a file.
//
// Unit is "lines" or "bytes"; Offset is where Content starts (lines or
// bytes skipped; a byte offset inside a UTF-8 sequence is moved to the
// next character); Count is how many lines or bytes Content holds;
// NextOffset continues after it; EOF says Content reaches the end of the
// file. Truncated says a limit cut the window short of what was asked
// (a line longer than MaxReadBytes is cut, and NextOffset skips the rest
// of it). SHA256 is the digest of the whole file, the revision that edit
// expects ("" for a file larger than MaxHashBytes). Binary files (a NUL
// byte or invalid UTF-8) have Binary set and no Content.
type ReadResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
	Unit       string `json:"unit"`
	Offset     int64  `json:"offset"`
	Count      int64  `json:"count"`
	NextOffset int64  `json:"next_offset"`
	EOF        bool   `json:"eof"`
	Truncated  bool   `json:"truncated"`
	Binary     bool   `json:"binary"`
	Content    string `json:"content"`
}

// ListResult is a directory's entries, sorted by name.
type ListResult struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated"`
}

// GlobResult is the entries a glob matched, sorted by path.
type GlobResult struct {
	Pattern   string  `json:"pattern"`
	Matches   []Entry `json:"matches"`
	Truncated bool    `json:"truncated"`
}

// SearchOptions shape a search. Include, when set, is a glob matched
// against each file's base name ("*.go").
type SearchOptions struct {
	Include    string
	IgnoreCase bool
	MaxResults int
	MaxOutput  int
}

// Match is one matching line; Line counts from 1.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"`
	Text string `json:"text"`
}

// SearchResult is a search's matches, in path and line order. Files
// skipped as binary or larger than MaxSearchFileBytes are counted.
type SearchResult struct {
	Pattern       string  `json:"pattern"`
	Path          string  `json:"path"`
	Matches       []Match `json:"matches"`
	Truncated     bool    `json:"truncated"`
	FilesSearched int     `json:"files_searched"`
	SkippedBinary int     `json:"skipped_binary"`
	SkippedLarge  int     `json:"skipped_large"`
}

// WriteResult is a file after a write or an edit. PreviousSHA256 is ""
// when the write created the file.
type WriteResult struct {
	Path           string `json:"path"`
	Created        bool   `json:"created"`
	Size           int64  `json:"size"`
	SHA256         string `json:"sha256"`
	PreviousSHA256 string `json:"previous_sha256"`
	Replacements   int    `json:"replacements,omitempty"`
}
