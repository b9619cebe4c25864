package allowlist

import "strings"

// sedDelims are the delimiters accepted for s commands and \cREc addresses.
const sedDelims = "/|#:,@%_"

// checkSedScript returns "" when script is a print-only sed script, or the
// reason it is refused. The grammar is deliberately small:
//
//	script  = cmd { ";" cmd }          (no newlines, no comments, no blocks)
//	cmd     = [ addr [ "," addr2 ] ] [ "!" ] verb   (or empty)
//	addr    = N | N~M | $ | /re/[IM] | \cREc[IM]
//	addr2   = addr | +N | ~N
//	verb    = p | P | = | d | q [N] | Q [N] | s/re/repl/[gpiImM0-9]*
//
// Everything that reads or writes files or runs programs (e, r, R, w, W,
// s///e, s///w) is outside it; the grammar also runs sed with --sandbox, so
// a divergence between this scanner and sed's still cannot reach them.
func checkSedScript(script string) string {
	s := &sedScanner{src: script}
	if strings.ContainsAny(script, "\n\r") {
		return "newlines are not allowed in a script (use ';')"
	}
	for {
		s.space()
		if s.eof() {
			return ""
		}
		if s.peek() == ';' {
			s.pos++
			continue
		}
		if rule := s.command(); rule != "" {
			return rule
		}
		s.space()
		if s.eof() {
			return ""
		}
		if s.peek() != ';' {
			return "unexpected " + quoteByte(s.peek()) + " after a command"
		}
		s.pos++
	}
}

type sedScanner struct {
	src string
	pos int
}

func (s *sedScanner) eof() bool  { return s.pos >= len(s.src) }
func (s *sedScanner) peek() byte { return s.src[s.pos] }

func (s *sedScanner) space() {
	for !s.eof() && (s.peek() == ' ' || s.peek() == '\t') {
		s.pos++
	}
}

func (s *sedScanner) digits() bool {
	start := s.pos
	for !s.eof() && s.peek() >= '0' && s.peek() <= '9' {
		s.pos++
	}
	return s.pos > start
}

func (s *sedScanner) command() string {
	if rule := s.address(false); rule != "" {
		return rule
	}
	s.space()
	if !s.eof() && s.peek() == ',' {
		s.pos++
		s.space()
		if rule := s.address(true); rule != "" {
			return rule
		}
		s.space()
	}
	if !s.eof() && s.peek() == '!' {
		s.pos++
		s.space()
	}
	if s.eof() {
		return "missing command"
	}
	verb := s.peek()
	s.pos++
	switch verb {
	case 'p', 'P', '=', 'd':
		return ""
	case 'q', 'Q':
		s.space()
		s.digits()
		return ""
	case 's':
		return s.substitute()
	}
	return "command " + quoteByte(verb) + " is not allowed (only p, P, =, d, q, Q and s without e/w)"
}

// address reads an optional address; second allows +N and ~N.
func (s *sedScanner) address(second bool) string {
	if s.eof() {
		return ""
	}
	switch c := s.peek(); {
	case c >= '0' && c <= '9':
		s.digits()
		if !s.eof() && s.peek() == '~' {
			s.pos++
			if !s.digits() {
				return "malformed first~step address"
			}
		}
	case c == '$':
		s.pos++
	case second && (c == '+' || c == '~'):
		s.pos++
		if !s.digits() {
			return "malformed +N/~N address"
		}
	case c == '/':
		s.pos++
		if rule := s.delimited('/'); rule != "" {
			return rule
		}
		s.regexFlags()
	case c == '\\':
		s.pos++
		if s.eof() || strings.IndexByte(sedDelims, s.peek()) < 0 {
			return "regex address delimiter must be one of " + sedDelims
		}
		d := s.peek()
		s.pos++
		if rule := s.delimited(d); rule != "" {
			return rule
		}
		s.regexFlags()
	}
	return ""
}

func (s *sedScanner) regexFlags() {
	for !s.eof() && (s.peek() == 'I' || s.peek() == 'M') {
		s.pos++
	}
}

// delimited skips to just past the next unescaped d, as sed's match_slash
// does (a backslash always takes the next byte; brackets are not special).
func (s *sedScanner) delimited(d byte) string {
	for !s.eof() {
		c := s.peek()
		s.pos++
		switch c {
		case '\\':
			if s.eof() {
				return "trailing backslash"
			}
			s.pos++
		case d:
			return ""
		}
	}
	return "unterminated regular expression"
}

func (s *sedScanner) substitute() string {
	if s.eof() || strings.IndexByte(sedDelims, s.peek()) < 0 {
		return "s delimiter must be one of " + sedDelims
	}
	d := s.peek()
	s.pos++
	if rule := s.delimited(d); rule != "" {
		return rule
	}
	if rule := s.delimited(d); rule != "" {
		return "unterminated s replacement"
	}
	for !s.eof() {
		switch c := s.peek(); {
		case c == 'g' || c == 'p' || c == 'i' || c == 'I' || c == 'm' || c == 'M' || (c >= '0' && c <= '9'):
			s.pos++
		case c == ' ' || c == '\t' || c == ';':
			return ""
		default:
			return "s flag " + quoteByte(c) + " is not allowed (only g, p, i, I, m, M and a number)"
		}
	}
	return ""
}

func quoteByte(c byte) string {
	if c > ' ' && c < 0x7f {
		return "'" + string(c) + "'"
	}
	return "byte " + printable(c)
}
