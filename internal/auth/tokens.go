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
)

// MinTokenBytes is the shortest token LoadTokens accepts. 16 random bytes
// is the least that resists online guessing; shorter strings are usually
// passwords typed by hand.
const MinTokenBytes = 16

// maxTokenFileBytes bounds how much of a token file is read, so a wrong path
// (a log, a device) fails fast instead of filling memory.
const maxTokenFileBytes = 1 << 20

// LoadTokens reads the bearer tokens a service accepts from path: one token
// per line, surrounding whitespace trimmed, blank lines and lines starting
// with # ignored. Several tokens let an operator rotate one without
// downtime. It is an error if the file is accessible by group or others
// (like ssh with a private key), holds no token, or holds a token shorter
// than MinTokenBytes or with bytes outside printable ASCII (a token travels
// in an HTTP/2 header). Errors name the line, never the token.
func LoadTokens(path string) ([]string, error) {
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

func parseTokens(path string, data []byte) ([]string, error) {
	var tokens []string
	seen := make(map[string]bool)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxTokenFileBytes)
	for line := 1; sc.Scan(); line++ {
		tok := strings.TrimSpace(sc.Text())
		if tok == "" || strings.HasPrefix(tok, "#") {
			continue
		}
		if err := checkToken(tok); err != nil {
			return nil, fmt.Errorf("auth: token file %s, line %d: %w", path, line, err)
		}
		if !seen[tok] {
			seen[tok] = true
			tokens = append(tokens, tok)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auth: token file %s: %w", path, err)
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("auth: token file %s holds no token (one per line; # starts a comment)", path)
	}
	return tokens, nil
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
