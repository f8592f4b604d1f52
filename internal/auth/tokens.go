package auth

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/lakedata/lake/wire"
)

// MinTokenBytes is the shortest token LoadTokens accepts. 16 random bytes
// is the least that resists online guessing; shorter strings are usually
// passwords typed by hand.
const MinTokenBytes = 16

// maxTokenFileBytes bounds how much of a token file is read, so a wrong path
// (a log, a device) fails fast instead of filling memory.
const maxTokenFileBytes = 1 << 20

// Token is one accepted bearer token and the scope it grants. Its String
// shows the scope only, so a Token printed by mistake leaks nothing.
type Token struct {
	Value string
	Scope wire.Scope
}

func (t Token) String() string { return "token(" + t.Scope.String() + ")" }

// GoString keeps %#v from printing the value too.
func (t Token) GoString() string { return t.String() }

// AdminTokens gives each of values the admin scope: the meaning of a token
// file line without a scope.
func AdminTokens(values []string) []Token {
	tokens := make([]Token, len(values))
	for i, v := range values {
		tokens[i] = Token{Value: v, Scope: wire.ScopeAdmin}
	}
	return tokens
}

// Widest returns the token of tokens with the widest scope, the first of
// them on a tie; false when tokens is empty. It is what a role presents
// to meta nodes when no other token is given: no caller of the role can
// need more than the role's widest token allows.
func Widest(tokens []Token) (Token, bool) {
	var best Token
	for _, t := range tokens {
		if t.Scope > best.Scope {
			best = t
		}
	}
	return best, best.Scope != 0
}

// ParseScope parses a scope word of a token file: read, write or admin.
func ParseScope(s string) (wire.Scope, bool) {
	for _, sc := range []wire.Scope{wire.ScopeRead, wire.ScopeWrite, wire.ScopeAdmin} {
		if s == sc.String() {
			return sc, true
		}
	}
	return 0, false
}

// LoadTokens reads the bearer tokens a service accepts from path. A line
// is TOKEN (an admin token) or TOKEN SCOPE, SCOPE one of read, write and
// admin (DESIGN §12), separated by spaces or tabs; surrounding whitespace
// is trimmed, blank lines and lines starting with # are ignored. Several
// tokens let an operator rotate one without downtime. It is an error if
// the file is accessible by group or others (like ssh with a private key),
// holds no token, holds a token shorter than MinTokenBytes or with bytes
// outside printable ASCII (a token travels in an HTTP/2 header), has a
// line with an unknown scope or more than two fields, or gives one token
// two scopes. Errors name the line, never the token nor the scope word
// (which may be half of a token with a space in it).
func LoadTokens(path string) ([]Token, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("auth: token file: %w", err)
	}
	defer f.Close()
	// Stat the open file rather than the path, so the mode checked is the
	// mode of the bytes read.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("auth: token file: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("auth: token file %s is a directory", path)
	}
	// Windows has no Unix permission bits; its ACLs are not checked.
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("auth: token file %s is accessible by group or others (mode %04o); run: chmod 600 %s", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	if len(data) > maxTokenFileBytes {
		return nil, fmt.Errorf("auth: token file %s is larger than %d bytes", path, maxTokenFileBytes)
	}
	return parseTokens(path, data)
}

func parseTokens(path string, data []byte) ([]Token, error) {
	var tokens []Token
	// seen maps a token to its index in tokens and the line it came from.
	type first struct{ index, line int }
	seen := make(map[string]first)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFileBytes)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		tok, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("auth: token file %s, line %d: %w", path, line, err)
		}
		if f, ok := seen[tok.Value]; ok {
			if tokens[f.index].Scope != tok.Scope {
				return nil, fmt.Errorf("auth: token file %s, line %d: %w: the token of line %d again, with another scope", path, line, errBadToken, f.line)
			}
			continue
		}
		seen[tok.Value] = first{index: len(tokens), line: line}
		tokens = append(tokens, tok)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("auth: token file %s holds no token (TOKEN or TOKEN SCOPE per line; # starts a comment)", path)
	}
	return tokens, nil
}

// parseLine parses one trimmed, non-comment line: TOKEN or TOKEN SCOPE.
func parseLine(text string) (Token, error) {
	fields := strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '\t' })
	tok := Token{Value: fields[0], Scope: wire.ScopeAdmin}
	switch len(fields) {
	case 1:
	case 2:
		sc, ok := ParseScope(fields[1])
		if !ok {
			return Token{}, fmt.Errorf("%w: unknown scope; a line is TOKEN or TOKEN SCOPE, SCOPE one of read, write, admin", errBadToken)
		}
		tok.Scope = sc
	default:
		return Token{}, fmt.Errorf("%w: %d fields; a line is TOKEN or TOKEN SCOPE, SCOPE one of read, write, admin", errBadToken, len(fields))
	}
	if err := checkToken(tok.Value); err != nil {
		return Token{}, err
	}
	return tok, nil
}

// errBadToken is what checkToken's errors wrap; it describes the token
// without quoting it.
var errBadToken = errors.New("invalid token")

// checkToken enforces the token rules without quoting the token.
func checkToken(tok string) error {
	if len(tok) < MinTokenBytes {
		return fmt.Errorf("%w: the token is %d bytes, at least %d are required (e.g. openssl rand -hex 32)", errBadToken, len(tok), MinTokenBytes)
	}
	if !printable(tok) {
		return fmt.Errorf("%w: the token contains spaces, control or non-ASCII bytes; only printable ASCII is allowed", errBadToken)
	}
	return nil
}

// printable reports whether s is made only of visible ASCII (0x21–0x7e), the
// bytes a token can carry unchanged in an HTTP/2 header after "Bearer ".
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
