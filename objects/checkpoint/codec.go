package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting: the format itself goes three levels deep
// (object, parts array, part).
const maxDepth = 4

// fieldNames are all JSON names of the format. encoding/json matches names
// case-insensitively and DisallowUnknownFields checks only the level, so
// scan checks exact spelling against this set first.
var fieldNames = map[string]bool{
	"version": true, "kind": true, "source": true, "path": true, "size": true, "mod_time": true,
	"binding": true, "bucket": true, "prefix": true, "key": true, "upload_id": true,
	"part_size": true, "sha256": true, "content_type": true, "parts": true,
	"number": true, "length": true, "etag": true, "checksum_sha256": true,
	"completed": true, "commit_id": true, "table": true, "updated_at": true,
}

// Encode validates cp and renders it in the file format: indented JSON,
// times in UTC, ending in a newline. cp is not modified.
func Encode(cp *Checkpoint) ([]byte, error) {
	if err := cp.Validate(); err != nil {
		return nil, err
	}
	c := *cp
	if c.Kind == KindMultipart {
		c.Kind = kindMultipartName
	}
	c.Source.ModTime = c.Source.ModTime.UTC()
	c.UpdatedAt = c.UpdatedAt.UTC()
	if c.Parts == nil {
		c.Parts = []Part{} // "parts": [], not null
	}
	return encodeLimited(&c, MaxSize, true)
}

// Decode parses a checkpoint file strictly and validates it. It accepts
// exactly one JSON object in valid UTF-8, at most MaxSize bytes, with a
// "version" field; a version other than 1 and Version → ErrUnknownVersion
// (checked before anything else, so a newer format is never called
// corrupt). A version 1 file has no "kind" and is returned as a
// KindMultipart checkpoint of Version; a version 2 file names its kind.
// Then unknown, misspelt or duplicate fields, wrong types,
// trailing data and any Validate failure → ErrCorrupt (a Validate failure
// also matches ErrInvalid). Times are returned in UTC and an empty part
// list as nil. Errors give byte offsets and field names, never the text.
func Decode(b []byte) (*Checkpoint, error) {
	sc, v, err := scanStrict(b, MaxSize, fieldNames, maxDepth, func(v int64) error {
		if v != 1 && v != Version {
			return fmt.Errorf("%w %d (this lake reads versions 1 and %d)", ErrUnknownVersion, v, Version)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if err := decodeStrict(b, &cp); err != nil {
		return nil, err
	}
	switch {
	case v == 1 && sc.kindSeen:
		return nil, fmt.Errorf("%w: a version 1 checkpoint has no kind", ErrCorrupt)
	case v == 1:
		cp.Version, cp.Kind = Version, KindMultipart
	case cp.Kind == kindMultipartName:
		cp.Kind = KindMultipart
	case cp.Kind == KindMultipart: // absent or ""
		return nil, fmt.Errorf("%w: no kind", ErrCorrupt)
	}
	cp.Source.ModTime = cp.Source.ModTime.UTC()
	cp.UpdatedAt = cp.UpdatedAt.UTC()
	if len(cp.Parts) == 0 {
		cp.Parts = nil
	}
	if err := cp.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return &cp, nil
}

// sanitize turns an encoding/json error into an ErrCorrupt that does not
// quote the input: json's messages may carry a value (a bad time, say).
func sanitize(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Errorf("%w: field %s has the wrong type (byte %d)", ErrCorrupt, te.Field, te.Offset)
		}
		return fmt.Errorf("%w: wrong type at byte %d", ErrCorrupt, te.Offset)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: invalid JSON at byte %d", ErrCorrupt, se.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("%w: truncated JSON", ErrCorrupt)
	}
	// Unknown field at the wrong level, or a malformed time.
	return fmt.Errorf("%w: does not match the checkpoint format", ErrCorrupt)
}

// scanStrict is the first half of a strict decode shared by the formats
// of this package: at most maxSize bytes of valid UTF-8, one JSON
// document of the format's field names and depth, a positive integer
// "version" that known accepts (checked before the fields, so a newer
// format is never called corrupt), and no unknown field. It returns the
// scanner, for what it saw, and the version.
func scanStrict(b []byte, maxSize int, names map[string]bool, depth int, known func(v int64) error) (*scanner, int64, error) {
	if len(b) > maxSize {
		return nil, 0, fmt.Errorf("%w: %d bytes, at most %d", ErrCorrupt, len(b), maxSize)
	}
	if !utf8.Valid(b) {
		return nil, 0, fmt.Errorf("%w: not valid UTF-8", ErrCorrupt)
	}
	sc := newScanner(b, names, depth)
	if err := sc.document(); err != nil {
		return nil, 0, err
	}
	if sc.version == nil {
		return nil, 0, fmt.Errorf("%w: no version field", ErrCorrupt)
	}
	v, err := strconv.ParseInt(sc.version.String(), 10, 64)
	if err != nil || v < 1 {
		return nil, 0, fmt.Errorf("%w: version is not a positive integer", ErrCorrupt)
	}
	if err := known(v); err != nil {
		return nil, 0, err
	}
	if sc.unknownAt >= 0 {
		return nil, 0, fmt.Errorf("%w: unknown field at byte %d", ErrCorrupt, sc.unknownAt)
	}
	return sc, v, nil
}

// decodeStrict decodes b into v, refusing unknown fields, with errors
// that never quote the text.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return sanitize(err)
	}
	return nil
}

// encodeLimited encodes v as JSON (indented when indent is set, HTML
// left alone so content types stay readable) and refuses a result over
// maxSize, which its decoder would refuse.
func encodeLimited(v any, maxSize int, indent bool) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if indent {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		return nil, invalid("encode: %v", err)
	}
	if buf.Len() > maxSize {
		return nil, invalid("encoded size %d bytes, at most %d", buf.Len(), maxSize)
	}
	return buf.Bytes(), nil
}

// scanner walks the token stream once before the real decode: it checks
// the syntax, that the document is one object with nothing after it, that
// no object repeats a name, and the nesting depth; it notes the top-level
// version and the offset of the first name outside the format.
type scanner struct {
	dec       *json.Decoder
	names     map[string]bool // every name of the format
	maxDepth  int
	version   *json.Number
	kindSeen  bool // a top-level "kind"
	unknownAt int64
}

// newScanner scans b for a format whose names are names, nested at most
// maxDepth deep.
func newScanner(b []byte, names map[string]bool, maxDepth int) *scanner {
	sc := &scanner{dec: json.NewDecoder(bytes.NewReader(b)), names: names, maxDepth: maxDepth, unknownAt: -1}
	sc.dec.UseNumber()
	return sc
}

func (sc *scanner) token() (json.Token, error) {
	tok, err := sc.dec.Token()
	if err != nil {
		return nil, sanitize(err)
	}
	return tok, nil
}

func (sc *scanner) document() error {
	tok, err := sc.token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%w: not a JSON object", ErrCorrupt)
	}
	if err := sc.object(1); err != nil {
		return err
	}
	off := sc.dec.InputOffset()
	if _, err := sc.dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: data after the checkpoint at byte %d", ErrCorrupt, off)
	}
	return nil
}

// object reads the rest of an object whose '{' was read.
func (sc *scanner) object(depth int) error {
	seen := make(map[string]bool)
	for sc.dec.More() {
		off := sc.dec.InputOffset()
		tok, err := sc.token()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: invalid JSON at byte %d", ErrCorrupt, off)
		}
		if seen[name] {
			return fmt.Errorf("%w: duplicate field at byte %d", ErrCorrupt, off)
		}
		seen[name] = true
		if !sc.names[name] && sc.unknownAt < 0 {
			sc.unknownAt = off
		}
		if depth == 1 && name == "kind" {
			sc.kindSeen = true
		}
		if depth == 1 && name == "version" {
			off := sc.dec.InputOffset()
			tok, err := sc.token()
			if err != nil {
				return err
			}
			n, ok := tok.(json.Number)
			if !ok {
				return fmt.Errorf("%w: version is not a number (byte %d)", ErrCorrupt, off)
			}
			sc.version = &n
			continue
		}
		if err := sc.value(depth); err != nil {
			return err
		}
	}
	_, err := sc.token() // '}'
	return err
}

func (sc *scanner) value(depth int) error {
	off := sc.dec.InputOffset()
	tok, err := sc.token()
	if err != nil {
		return err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if depth >= sc.maxDepth {
		return fmt.Errorf("%w: nested too deeply at byte %d", ErrCorrupt, off)
	}
	if d == '{' {
		return sc.object(depth + 1)
	}
	for sc.dec.More() { // '['
		if err := sc.value(depth + 1); err != nil {
			return err
		}
	}
	_, err = sc.token() // ']'
	return err
}
