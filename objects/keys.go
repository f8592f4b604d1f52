package objects

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/lakedata/lake/wire"
)

// maxNameLen bounds the readable tail of an object key.
const maxNameLen = 200

// NewObjectKey mints a random, never-reused key under objects/ for a file
// whose base name is name: objects/<yyyy>/<mm>/<dd>/<uuidv7>-<clean name>.
// The date and UUIDv7 keep keys roughly time-ordered for listing; the name
// keeps them readable and lets tools guess a content type.
//
// Objects of one day share a directory: on a local stage a directory per
// object would cost a mkdir and the fsyncs that make it durable on every
// put, and a directory inode per file. The day bounds how large one
// directory grows. Keys minted before (objects/<yyyy>/<mm>/<uuidv7>/<name>)
// stay valid: nothing parses an object key beyond ValidateObjectKey, and
// every reader takes a key as an opaque path.
func NewObjectKey(name string, now time.Time) string {
	id := uuid.Must(uuid.NewV7())
	return wire.ObjectsPrefix + now.UTC().Format("2006/01/02") + "/" + id.String() + "-" + CleanName(name)
}

// CleanName turns an arbitrary file name into one safe key segment: runes
// outside [A-Za-z0-9._-] become '_', leading dots are dropped (so "." and
// ".." cannot appear), and the length is bounded. An empty result is "file".
func CleanName(name string) string {
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	var b strings.Builder
	for _, r := range name {
		if b.Len() >= maxNameLen {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == '.':
			if b.Len() > 0 {
				b.WriteRune(r)
			}
		case r == utf8.RuneError:
			b.WriteByte('_')
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "file"
	}
	return b.String()
}
