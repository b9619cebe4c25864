package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal for tests: a program writes to Slave as to its
// terminal, and what a terminal emulator would receive is read from
// Master. Output post-processing (OPOST: \n to \r\n) is off, so the bytes
// read are the bytes written.
type PTY struct {
	Master, Slave *os.File
	done          chan struct{}
	buf           bytes.Buffer
}

// OpenPTY opens a pseudo-terminal (/dev/ptmx, as openpty(3) does) and
// starts reading its master side; both sides are closed in t.Cleanup.
func OpenPTY(t testing.TB) *PTY {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlocking the pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("opening the pty's slave: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	tio, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatalf("pty termios: %v", err)
	}
	tio.Oflag &^= unix.OPOST
	if err := unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, tio); err != nil {
		t.Fatalf("pty termios: %v", err)
	}
	p := &PTY{Master: m, Slave: s, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		_, err := io.Copy(&p.buf, m)
		// EIO: every slave descriptor is closed.
		if err != nil && !errors.Is(err, unix.EIO) && !errors.Is(err, os.ErrClosed) {
			t.Errorf("reading the pty: %v", err)
		}
	}()
	return p
}

// Output closes the slave (a child holding its own copy keeps it open
// until it exits) and returns everything written to the terminal.
func (p *PTY) Output() []byte {
	p.Slave.Close()
	<-p.done
	return p.buf.Bytes()
}

// TerminalUnsafe returns the first rune of b that a terminal could act
// on or that hides or reorders text: a C0 or C1 control other than tab,
// newline and carriage return (ESC starts every escape sequence), a
// Unicode format character (bidi controls, tag characters, zero-width
// ones), a line or paragraph separator, or invalid UTF-8. ok is false
// when there is none.
func TerminalUnsafe(b []byte) (r rune, at int, ok bool) {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return r, i, true
		case r == '\t' || r == '\n' || r == '\r':
		case unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r), r == '\u2028', r == '\u2029':
			return r, i, true
		}
		i += n
	}
	return 0, 0, false
}
