package query

import (
	"reflect"
	"unsafe"

	"github.com/duckdb/duckdb-go/v2"
	"github.com/duckdb/duckdb-go/v2/mapping"
)

// duckdb-go interrupts a statement only inside its own QueryContext and
// ExecContext. Preparing (binding, planning and the optimizer's constant
// folding, where `SELECT len(range(200000000))` spends minutes and many
// GB) cannot be stopped through its API. The role must stop it, so it
// takes the native connection handle, the first field of duckdb.Conn, and
// calls duckdb_interrupt on it. The field's name and type are checked once;
// if a newer duckdb-go moves it, interrupting a Prepare is off (the
// statement still stops at its deadline once it runs) and
// TestInterruptHandleFound fails.
var connField = func() *reflect.StructField {
	f, ok := reflect.TypeFor[duckdb.Conn]().FieldByName("conn")
	if !ok || f.Type != reflect.TypeFor[mapping.Connection]() {
		return nil
	}
	return &f
}()

// interruptHandle returns a function that interrupts whatever c runs now,
// or nil when the handle cannot be found.
func interruptHandle(c *duckdb.Conn) func() {
	h, ok := nativeConn(c)
	if !ok {
		return nil
	}
	return func() { mapping.Interrupt(h) }
}

// nativeConn returns c's native connection handle, which the role also
// runs streaming statements on (engine_arrow.go).
func nativeConn(c *duckdb.Conn) (mapping.Connection, bool) {
	if connField == nil {
		return mapping.Connection{}, false
	}
	return *(*mapping.Connection)(unsafe.Add(unsafe.Pointer(c), connField.Offset)), true
}
