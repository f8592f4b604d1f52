package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkSchemaMessage vets an IPC-serialized schema before the arrow IPC
// reader parses it. That reader trusts the FlatBuffer: it allocates a slice
// as long as whatever vector length the bytes claim, and it follows field
// children recursively. A few dozen hostile bytes could therefore make it
// allocate hundreds of gigabytes or recurse through a cycle (FlatBuffer
// offsets are uint32 and wrap around, so they can point backwards) until the
// Go runtime aborts the process — neither can be recovered. This walk reads
// exactly the positions the arrow reader will read, with the same
// wrap-around arithmetic, and refuses the message unless every vector fits
// in the buffer, no Field table is reached twice, nesting stays within
// maxSchemaDepth and the strings and elements the reader will copy stay
// within a budget proportional to the input.
func checkSchemaMessage(b []byte) error {
	meta, err := ipcMessageMetadata(b)
	if err != nil {
		return err
	}
	w := &fbWalk{
		buf:      meta,
		seen:     make(map[uint32]bool),
		elemLeft: len(meta)/2 + 64,
		byteLeft: 4*len(meta) + 1024,
	}
	return w.message()
}

// maxSchemaDepth bounds field nesting (Arrow C++ uses the same limit).
const maxSchemaDepth = 64

var errCorruptSchema = errors.New("corrupt schema message")

// ipcMessageMetadata returns the FlatBuffer metadata of the first message
// of an IPC stream, framed as the arrow reader expects: an optional
// 0xFFFFFFFF continuation marker, a little-endian int32 length, then the
// metadata.
func ipcMessageMetadata(b []byte) ([]byte, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", errCorruptSchema, len(b))
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if n == 0xFFFFFFFF {
		if len(b) < 4 {
			return nil, fmt.Errorf("%w: truncated message length", errCorruptSchema)
		}
		n = binary.LittleEndian.Uint32(b)
		b = b[4:]
	}
	if n < 4 || uint64(n) > uint64(len(b)) {
		return nil, fmt.Errorf("%w: message metadata length %d with %d bytes left", errCorruptSchema, int32(n), len(b))
	}
	return b[:n], nil
}

// fbWalk reads a FlatBuffer the way the FlatBuffers Go runtime does
// (uint32 positions, wrap-around offset arithmetic) but bounds-checked.
type fbWalk struct {
	buf      []byte
	seen     map[uint32]bool // Field tables already visited
	elemLeft int             // vector elements the reader may still allocate
	byteLeft int             // string bytes the reader may still copy
}

// Slot numbers of the Arrow FlatBuffer tables (format/Message.fbs,
// format/Schema.fbs) that the walk follows.
const (
	fbMessageHeaderType = 1
	fbMessageHeader     = 2
	fbSchemaFields      = 1
	fbSchemaMetadata    = 2
	fbFieldNameSlot     = 0
	fbFieldTypeType     = 2
	fbFieldTypeSlot     = 3
	fbFieldChildrenSlot = 5
	fbFieldMetadata     = 6
	fbKeyValueKey       = 0
	fbKeyValueValue     = 1
	fbTimestampTimezone = 1
	fbUnionTypeIDs      = 1

	fbMessageHeaderSchema = 1
	fbTypeTimestamp       = 10
	fbTypeUnion           = 14
)

func (w *fbWalk) u32(pos uint32) (uint32, error) {
	if uint64(pos)+4 > uint64(len(w.buf)) {
		return 0, fmt.Errorf("%w: offset %d out of range", errCorruptSchema, pos)
	}
	return binary.LittleEndian.Uint32(w.buf[pos:]), nil
}

func (w *fbWalk) u16(pos uint32) (uint16, error) {
	if uint64(pos)+2 > uint64(len(w.buf)) {
		return 0, fmt.Errorf("%w: offset %d out of range", errCorruptSchema, pos)
	}
	return binary.LittleEndian.Uint16(w.buf[pos:]), nil
}

// indirect follows the uoffset stored at pos.
func (w *fbWalk) indirect(pos uint32) (uint32, error) {
	off, err := w.u32(pos)
	return pos + off, err
}

// slot returns the position of field slot i of the table at table, or
// ok=false when the field is absent.
func (w *fbWalk) slot(table uint32, i int) (pos uint32, ok bool, err error) {
	so, err := w.u32(table)
	if err != nil {
		return 0, false, err
	}
	vt := uint32(int32(table) - int32(so))
	vsize, err := w.u16(vt)
	if err != nil {
		return 0, false, err
	}
	voff := uint16(4 + 2*i)
	if voff >= vsize {
		return 0, false, nil
	}
	o, err := w.u16(vt + uint32(voff))
	if err != nil || o == 0 {
		return 0, false, err
	}
	return table + uint32(o), true, nil
}

// ref returns the table, vector or string that slot i of table points to.
func (w *fbWalk) ref(table uint32, i int) (uint32, bool, error) {
	pos, ok, err := w.slot(table, i)
	if !ok || err != nil {
		return 0, false, err
	}
	target, err := w.indirect(pos)
	return target, err == nil, err
}

// vector checks the vector in slot i of table (elements of elemSize bytes)
// and charges its length; it returns the position of its first element.
func (w *fbWalk) vector(table uint32, i int, elemSize uint64) (start uint32, n int, err error) {
	v, ok, err := w.ref(table, i)
	if !ok || err != nil {
		return 0, 0, err
	}
	length, err := w.u32(v)
	if err != nil {
		return 0, 0, err
	}
	start = v + 4
	if uint64(start)+elemSize*uint64(length) > uint64(len(w.buf)) {
		return 0, 0, fmt.Errorf("%w: vector of %d elements overruns the message", errCorruptSchema, length)
	}
	if w.elemLeft -= int(length); w.elemLeft < 0 {
		return 0, 0, fmt.Errorf("%w: too many fields or metadata entries", errCorruptSchema)
	}
	return start, int(length), nil
}

// str checks the string in slot i of table and charges its length.
func (w *fbWalk) str(table uint32, i int) error {
	s, ok, err := w.ref(table, i)
	if !ok || err != nil {
		return err
	}
	length, err := w.u32(s)
	if err != nil {
		return err
	}
	if uint64(s)+4+uint64(length) > uint64(len(w.buf)) {
		return fmt.Errorf("%w: string of %d bytes overruns the message", errCorruptSchema, length)
	}
	if w.byteLeft -= int(length); w.byteLeft < 0 {
		return fmt.Errorf("%w: too many name and metadata bytes", errCorruptSchema)
	}
	return nil
}

// tables calls f for each table referenced from the vector in slot i.
func (w *fbWalk) tables(table uint32, i int, f func(uint32) error) error {
	start, n, err := w.vector(table, i, 4)
	if err != nil {
		return err
	}
	for j := range n {
		t, err := w.indirect(start + uint32(j)*4)
		if err != nil {
			return err
		}
		if err := f(t); err != nil {
			return err
		}
	}
	return nil
}

func (w *fbWalk) message() error {
	root, err := w.u32(0)
	if err != nil {
		return err
	}
	pos, ok, err := w.slot(root, fbMessageHeaderType)
	if err != nil {
		return err
	}
	if !ok || pos >= uint32(len(w.buf)) || w.buf[pos] != fbMessageHeaderSchema {
		return fmt.Errorf("%w: not a schema message", errCorruptSchema)
	}
	schema, ok, err := w.ref(root, fbMessageHeader)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: schema message without a schema", errCorruptSchema)
	}
	if err := w.tables(schema, fbSchemaFields, func(f uint32) error { return w.field(f, 1) }); err != nil {
		return err
	}
	return w.tables(schema, fbSchemaMetadata, w.keyValue)
}

func (w *fbWalk) field(f uint32, depth int) error {
	if depth > maxSchemaDepth {
		return fmt.Errorf("%w: fields nested deeper than %d", errCorruptSchema, maxSchemaDepth)
	}
	if w.seen[f] {
		return fmt.Errorf("%w: a field is referenced twice", errCorruptSchema)
	}
	w.seen[f] = true
	if err := w.str(f, fbFieldNameSlot); err != nil {
		return err
	}
	if err := w.fieldType(f); err != nil {
		return err
	}
	if err := w.tables(f, fbFieldChildrenSlot, func(c uint32) error { return w.field(c, depth+1) }); err != nil {
		return err
	}
	return w.tables(f, fbFieldMetadata, w.keyValue)
}

// fieldType charges what the reader copies out of the type table: a
// timestamp's time zone and a union's type ids.
func (w *fbWalk) fieldType(f uint32) error {
	pos, ok, err := w.slot(f, fbFieldTypeType)
	if !ok || err != nil || pos >= uint32(len(w.buf)) {
		return err // an absent or unreadable type fails in the reader
	}
	typeType := w.buf[pos]
	if typeType != fbTypeTimestamp && typeType != fbTypeUnion {
		return nil
	}
	t, ok, err := w.ref(f, fbFieldTypeSlot)
	if !ok || err != nil {
		return err
	}
	if typeType == fbTypeTimestamp {
		return w.str(t, fbTimestampTimezone)
	}
	_, _, err = w.vector(t, fbUnionTypeIDs, 4)
	return err
}

func (w *fbWalk) keyValue(kv uint32) error {
	if err := w.str(kv, fbKeyValueKey); err != nil {
		return err
	}
	return w.str(kv, fbKeyValueValue)
}
