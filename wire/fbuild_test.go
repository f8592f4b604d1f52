package wire

import "encoding/binary"

// A minimal FlatBuffers writer for hand-made Arrow IPC schema messages,
// including hostile ones (backward offsets, cycles, lying vector lengths)
// that the arrow IPC writer would never produce. Offsets are stored as
// uint32(target-at), the wrap-around arithmetic the FlatBuffers Go runtime
// uses to read them, so any position can point to any other.

// slot kinds of fbTable.
const (
	fbNone = iota
	fbU8
	fbU16
	fbRef // a uoffset, patched with fbw.ref
	fbI64
)

type fbSlot struct {
	kind int
	val  uint64
}

type fbw struct{ b []byte }

func (w *fbw) u32(at int, v uint32) { binary.LittleEndian.PutUint32(w.b[at:], v) }

// ref stores at position at a uoffset pointing to target.
func (w *fbw) ref(at, target int) { w.u32(at, uint32(target-at)) }

func (w *fbw) grow(n int) int {
	at := len(w.b)
	w.b = append(w.b, make([]byte, n)...)
	return at
}

// table writes a vtable and its table; it returns the table position and,
// per slot, the position of its value (-1 for absent slots).
func (w *fbw) table(slots ...fbSlot) (int, []int) {
	vt := w.grow(4 + 2*len(slots))
	size := 4
	for _, s := range slots {
		switch s.kind {
		case fbU8:
			size++
		case fbU16:
			size += 2
		case fbRef:
			size += 4
		case fbI64:
			size += 8
		}
	}
	binary.LittleEndian.PutUint16(w.b[vt:], uint16(4+2*len(slots)))
	binary.LittleEndian.PutUint16(w.b[vt+2:], uint16(size))
	t := w.grow(size)
	binary.LittleEndian.PutUint32(w.b[t:], uint32(int32(t-vt)))
	pos := make([]int, len(slots))
	off := 4
	for i, s := range slots {
		pos[i] = -1
		if s.kind == fbNone {
			continue
		}
		binary.LittleEndian.PutUint16(w.b[vt+4+2*i:], uint16(off))
		pos[i] = t + off
		switch s.kind {
		case fbU8:
			w.b[t+off] = byte(s.val)
			off++
		case fbU16:
			binary.LittleEndian.PutUint16(w.b[t+off:], uint16(s.val))
			off += 2
		case fbRef:
			off += 4
		case fbI64:
			binary.LittleEndian.PutUint64(w.b[t+off:], s.val)
			off += 8
		}
	}
	return t, pos
}

// vector writes a vector of n uoffsets whose stored length is length; it
// returns the vector position and the positions of its n elements.
func (w *fbw) vector(length uint32, n int) (int, []int) {
	at := w.grow(4 + 4*n)
	w.u32(at, length)
	elems := make([]int, n)
	for i := range elems {
		elems[i] = at + 4 + 4*i
	}
	return at, elems
}

func (w *fbw) str(s string) int {
	at := w.grow(4 + len(s) + 1)
	w.u32(at, uint32(len(s)))
	copy(w.b[at+4:], s)
	return at
}

// Arrow flatbuffer enum values (format/Message.fbs, Schema.fbs).
const (
	fbMetadataV5    = 4
	fbHeaderSchema  = 1
	fbTypeUtf8      = 5
	fbTypeStruct    = 13
	fbFieldName     = 0
	fbFieldType     = 3
	fbFieldChildren = 5
)

// schemaMessage starts a buffer holding a Message whose Schema header has
// a fields vector of stored length length with n element slots; it
// returns the writer and the element positions to patch.
func schemaMessage(length uint32, n int) (*fbw, []int) {
	w := &fbw{}
	root := w.grow(4)
	msg, mp := w.table(fbSlot{fbU16, fbMetadataV5}, fbSlot{fbU8, fbHeaderSchema}, fbSlot{kind: fbRef}, fbSlot{fbI64, 0})
	w.ref(root, msg)
	schema, sp := w.table(fbSlot{fbU16, 0}, fbSlot{kind: fbRef})
	w.ref(mp[2], schema)
	vec, elems := w.vector(length, n)
	w.ref(sp[1], vec)
	return w, elems
}

// field writes a Field table named name of type typ (fbTypeUtf8 or
// fbTypeStruct); it returns the field position and the position of its
// children reference (-1 without children).
func (w *fbw) field(name string, typ uint64, withChildren bool) (int, int) {
	children := fbSlot{}
	if withChildren {
		children = fbSlot{kind: fbRef}
	}
	f, fp := w.table(fbSlot{kind: fbRef}, fbSlot{fbU8, 1}, fbSlot{fbU8, typ}, fbSlot{kind: fbRef}, fbSlot{}, children, fbSlot{})
	w.ref(fp[fbFieldName], w.str(name))
	typeTable, _ := w.table()
	w.ref(fp[fbFieldType], typeTable)
	return f, fp[fbFieldChildren]
}

// ipcFrame wraps flatbuffer message metadata in the IPC stream framing
// (continuation marker, length, metadata padded to 8 bytes, end of stream).
func ipcFrame(meta []byte) []byte {
	for len(meta)%8 != 0 {
		meta = append(meta, 0)
	}
	b := make([]byte, 8, 8+len(meta)+8)
	binary.LittleEndian.PutUint32(b, 0xFFFFFFFF)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(meta)))
	b = append(b, meta...)
	return append(b, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0)
}
