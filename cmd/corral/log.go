package main

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// Default log levels: the CLI says only what went wrong; a long-lived
// process (the daemon) also what it does.
const (
	defaultCLILevel    = slog.LevelWarn
	defaultDaemonLevel = slog.LevelInfo
)

// level returns the resolved log level (--log-level, CORRAL_LOG_LEVEL,
// config log_level), or def when none was set.
func (g *globalFlags) level(def slog.Level) slog.Level {
	var l slog.Level
	if g.cfg.LogLevel == "" || l.UnmarshalText([]byte(g.cfg.LogLevel)) != nil {
		return def
	}
	return l
}

// newLogger returns a logger writing text records (level=… msg=…, no
// time: stderr of a command is read by a person or kept by a service
// manager that stamps it) to w at level and above.
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
}

// logger returns the command's logger on w at the resolved level (def
// when none is set).
func (g *globalFlags) logger(w io.Writer, def slog.Level) *slog.Logger {
	return newLogger(w, g.level(def))
}

// progress returns the writer for sandbox.Config.Log: each line the
// sandbox writes there ("corral: building image … on first use") becomes
// an info record of the command's logger. io.Discard stays io.Discard
// (--quiet).
func (g *globalFlags) progress(w io.Writer, def slog.Level) io.Writer {
	if w == nil || w == io.Discard {
		return w
	}
	return &lineLogger{log: g.logger(w, def)}
}

// lineLogger turns each line written to it into one info record.
type lineLogger struct {
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimPrefix(string(l.buf[:i]), "corral: ")
		l.buf = l.buf[i+1:]
		if line != "" {
			l.log.Info(line)
		}
	}
}
