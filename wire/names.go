package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxTableNameLen bounds table names so they stay usable as SQL identifiers.
const MaxTableNameLen = 63

// ValidateTableName accepts lowercase SQL-friendly identifiers:
// [a-z_][a-z0-9_]*, at most 63 bytes. Lowercase only, because SQL engines
// fold unquoted identifiers and two names differing in case would collide.
func ValidateTableName(name string) error {
	if name == "" {
		return fmt.Errorf("%w: empty", ErrInvalidTable)
	}
	if len(name) > MaxTableNameLen {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidTable, len(name), MaxTableNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return fmt.Errorf("%w: %q: use lowercase letters, digits and _, not starting with a digit", ErrInvalidTable, clip(name, 80))
		}
	}
	return nil
}

// MaxKeyLen bounds stage keys (S3 allows 1024 bytes).
const MaxKeyLen = 1024

// ObjectsPrefix is where file objects live in the stage (DESIGN §2).
const ObjectsPrefix = "objects/"

// ValidateKey checks that key is a clean relative stage key: not empty,
// valid UTF-8, no NUL or control characters, no backslash, not absolute,
// no empty, "." or ".." segments. Both backends rely on it to keep every key
// inside the stage root.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("%w: %q is absolute", ErrInvalidKey, clip(key, 120))
	case strings.ContainsRune(key, '\\'):
		return fmt.Errorf("%w: %q contains a backslash", ErrInvalidKey, clip(key, 120))
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: contains a control character or NUL", ErrInvalidKey)
		}
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty path segment", ErrInvalidKey, clip(key, 120))
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, clip(key, 120), seg)
		}
	}
	return nil
}

// ValidateObjectKey checks that key is a clean key under objects/, the only
// place a FILE value may point to.
func ValidateObjectKey(key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if !strings.HasPrefix(key, ObjectsPrefix) {
		return fmt.Errorf("%w: %q is not under %s", ErrInvalidKey, clip(key, 120), ObjectsPrefix)
	}
	return nil
}
