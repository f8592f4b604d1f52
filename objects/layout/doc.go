// Package layout is the one description of the metadata tree under _lake/
// in the managed stage (DESIGN §2, §9, §14):
//
//	_lake/catalog/<name>.json                         table name → id, put-if-absent
//	_lake/tables/<id>/log/<version, 20 digits>.json   the commit log, put-if-absent
//	_lake/tables/<id>/data/<uuid>.parquet             row data
//	_lake/tables/<id>/checkpoints/<version>.json      log checkpoints (derived)
//	_lake/tables/<id>/metadata/<file>                 Iceberg metadata (derived)
//
// The metadata role writes these keys and the query role reads the data
// files and fences SQL into _lake/tables/; both build the keys here, and
// Parse turns a key back into its table, version or file.
//
// It lives under objects because the stage layout is part of the stage
// contract that objects owns, next to the object keys it mints: both roles
// already import objects, objects may import wire (for the table-name
// rule) and github.com/google/uuid (for data file names), and wire stays
// what crosses the Flight wire and imports nothing of lake. Only the
// object prefix, objects/, stays in wire, because validating a FILE value
// needs it.
package layout
