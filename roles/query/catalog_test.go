//go:build duckdb_arrow

package query_test

import (
	"context"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/wire"
)

// fetchInfo reads every endpoint of info into records released at the end
// of the test.
func (l *lakeFixture) fetchInfo(t *testing.T, info *flight.FlightInfo, err error) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	schema, recs, err := l.readEndpoints(info)
	if err != nil {
		t.Fatal(err)
	}
	return schema, recs
}

// stringsOf returns column i of recs, which must be strings.
func stringsOf(t *testing.T, recs []arrow.RecordBatch, i int) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		c, ok := r.Column(i).(*array.String)
		if !ok {
			t.Fatalf("column %d is %s, want utf8", i, r.Column(i).DataType())
		}
		for j := range c.Len() {
			out = append(out, c.Value(j))
		}
	}
	return out
}

// pattern is a filter pattern or catalog name for the Flight SQL options.
func pattern(s string) *string { return &s }

func TestCatalogCommands(t *testing.T) {
	l := newLake(t)
	ctx := context.Background()
	frames := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		wire.FileField("frame", true),
	}, nil)
	l.createTable("clips", wire.DefaultSchema())
	l.createTable("frames", frames)
	l.putFile("clips", "a.mp4", []byte("aaa"))
	declared := map[string]*arrow.Schema{"clips": wire.DefaultSchema(), "frames": frames}

	t.Run("GetCatalogs", func(t *testing.T) {
		info, err := l.sql.GetCatalogs(ctx)
		schema, recs := l.fetchInfo(t, info, err)
		if schema.Field(0).Name != "catalog_name" {
			t.Errorf("schema %v", schema)
		}
		if got := stringsOf(t, recs, 0); !slices.Equal(got, []string{"lake"}) {
			t.Errorf("catalogs %q, want [lake]", got)
		}
	})

	t.Run("GetDBSchemas", func(t *testing.T) {
		for _, c := range []struct {
			name string
			opts *flightsql.GetDBSchemasOpts
			want []string
		}{
			{"all", nil, []string{"main"}},
			{"empty options", &flightsql.GetDBSchemasOpts{}, []string{"main"}},
			{"catalog lake", &flightsql.GetDBSchemasOpts{Catalog: pattern("lake")}, []string{"main"}},
			{"pattern m%", &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: pattern("m%")}, []string{"main"}},
			{"pattern m_in", &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: pattern("m_in")}, []string{"main"}},
			{"pattern no match", &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: pattern("public")}, nil},
			{"pattern prefix only", &flightsql.GetDBSchemasOpts{DbSchemaFilterPattern: pattern("mai")}, nil},
			{"other catalog", &flightsql.GetDBSchemasOpts{Catalog: pattern("other")}, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				info, err := l.sql.GetDBSchemas(ctx, c.opts)
				schema, recs := l.fetchInfo(t, info, err)
				if schema.NumFields() != 2 || schema.Field(1).Name != "db_schema_name" {
					t.Fatalf("schema %v", schema)
				}
				if got := stringsOf(t, recs, 1); !slices.Equal(got, c.want) {
					t.Errorf("schemas %q, want %q", got, c.want)
				}
				for _, cat := range stringsOf(t, recs, 0) {
					if cat != "lake" {
						t.Errorf("catalog %q", cat)
					}
				}
			})
		}
	})

	t.Run("GetTables", func(t *testing.T) {
		for _, c := range []struct {
			name string
			opts *flightsql.GetTablesOpts
			want []string
		}{
			{"all", &flightsql.GetTablesOpts{}, []string{"clips", "frames"}},
			{"with schema", &flightsql.GetTablesOpts{IncludeSchema: true}, []string{"clips", "frames"}},
			{"catalog and schema", &flightsql.GetTablesOpts{Catalog: pattern("lake"), DbSchemaFilterPattern: pattern("main")}, []string{"clips", "frames"}},
			{"other catalog", &flightsql.GetTablesOpts{Catalog: pattern("other")}, nil},
			{"other schema", &flightsql.GetTablesOpts{DbSchemaFilterPattern: pattern("public")}, nil},
			{"%", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("%")}, []string{"clips", "frames"}},
			{"cl%", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("cl%")}, []string{"clips"}},
			{"%s", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("%s")}, []string{"clips", "frames"}},
			{"%am%", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("%am%"), IncludeSchema: true}, []string{"frames"}},
			{"_lips", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("_lips")}, []string{"clips"}},
			{"c_ip_", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("c_ip_")}, []string{"clips"}},
			{"exact", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("frames")}, []string{"frames"}},
			{"_ is one character", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("clip__")}, nil},
			{"no regexp", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("cl.ps")}, nil},
			{"no regexp star", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("c.*")}, nil},
			{"prefix only", &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("clip")}, nil},
			{"type TABLE", &flightsql.GetTablesOpts{TableTypes: []string{"TABLE"}}, []string{"clips", "frames"}},
			{"types VIEW, TABLE", &flightsql.GetTablesOpts{TableTypes: []string{"VIEW", "TABLE"}}, []string{"clips", "frames"}},
			{"type VIEW", &flightsql.GetTablesOpts{TableTypes: []string{"VIEW"}}, nil},
			{"type SYSTEM TABLE", &flightsql.GetTablesOpts{TableTypes: []string{"SYSTEM TABLE"}, IncludeSchema: true}, nil},
		} {
			t.Run(c.name, func(t *testing.T) {
				info, err := l.sql.GetTables(ctx, c.opts)
				schema, recs := l.fetchInfo(t, info, err)
				wantCols := []string{"catalog_name", "db_schema_name", "table_name", "table_type"}
				if c.opts.IncludeSchema {
					wantCols = append(wantCols, "table_schema")
				}
				var cols []string
				for _, f := range schema.Fields() {
					cols = append(cols, f.Name)
				}
				if !slices.Equal(cols, wantCols) {
					t.Fatalf("columns %q, want %q", cols, wantCols)
				}
				names := stringsOf(t, recs, 2)
				slices.Sort(names)
				if !slices.Equal(names, c.want) {
					t.Errorf("tables %q, want %q", names, c.want)
				}
				for i, col := range []string{"lake", "main", "", "TABLE"} {
					if col == "" {
						continue
					}
					for _, v := range stringsOf(t, recs, i) {
						if v != col {
							t.Errorf("%s = %q, want %q", wantCols[i], v, col)
						}
					}
				}
				if !c.opts.IncludeSchema {
					return
				}
				for _, r := range recs {
					tables := r.Column(2).(*array.String)
					schemas := r.Column(4).(*array.Binary)
					for j := range int(r.NumRows()) {
						name := tables.Value(j)
						got, err := flight.DeserializeSchema(schemas.Value(j), memory.DefaultAllocator)
						if err != nil {
							t.Fatalf("schema of %s: %v", name, err)
						}
						if !got.Equal(declared[name]) {
							t.Errorf("schema of %s:\n%v\nwant\n%v", name, got, declared[name])
						}
						for _, f := range got.Fields() {
							if f.Name == "file" || f.Name == "frame" {
								if !wire.IsFileField(f) || !arrow.TypeEqual(f.Type, wire.FileType()) {
									t.Errorf("%s.%s is %v, want a FILE field (lake.type=file)", name, f.Name, f)
								}
							}
						}
					}
				}
			})
		}
	})

	t.Run("GetTables sees a new table", func(t *testing.T) {
		l.createTable("zebras", arrow.NewSchema([]arrow.Field{{Name: "stripes", Type: arrow.PrimitiveTypes.Int32}}, nil))
		info, err := l.sql.GetTables(ctx, &flightsql.GetTablesOpts{TableNameFilterPattern: pattern("z%")})
		_, recs := l.fetchInfo(t, info, err)
		if got := stringsOf(t, recs, 2); !slices.Equal(got, []string{"zebras"}) {
			t.Errorf("tables %q, want [zebras]", got)
		}
	})

	t.Run("GetTableTypes", func(t *testing.T) {
		info, err := l.sql.GetTableTypes(ctx)
		schema, recs := l.fetchInfo(t, info, err)
		if schema.Field(0).Name != "table_type" {
			t.Errorf("schema %v", schema)
		}
		if got := stringsOf(t, recs, 0); !slices.Equal(got, []string{"TABLE"}) {
			t.Errorf("table types %q, want [TABLE]", got)
		}
	})

	t.Run("GetSqlInfo", func(t *testing.T) {
		info, err := l.sql.GetSqlInfo(ctx, []flightsql.SqlInfo{
			flightsql.SqlInfoFlightSqlServerName,
			flightsql.SqlInfoFlightSqlServerReadOnly,
			flightsql.SqlInfoDDLTable,
			flightsql.SqlInfoTransactionsSupported,
		})
		_, recs := l.fetchInfo(t, info, err)
		got := sqlInfoValues(t, recs)
		want := map[flightsql.SqlInfo]any{
			flightsql.SqlInfoFlightSqlServerName:     "lake",
			flightsql.SqlInfoFlightSqlServerReadOnly: true,
			flightsql.SqlInfoDDLTable:                false,
			flightsql.SqlInfoTransactionsSupported:   false,
		}
		for id, v := range want {
			if got[id] != v {
				t.Errorf("%v = %v (%T), want %v", id, got[id], got[id], v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("asked for %d infos, got %v", len(want), got)
		}

		// Without a list, every registered info comes back.
		info, err = l.sql.GetSqlInfo(ctx, nil)
		_, recs = l.fetchInfo(t, info, err)
		all := sqlInfoValues(t, recs)
		if all[flightsql.SqlInfoFlightSqlServerReadOnly] != true || all[flightsql.SqlInfoFlightSqlServerName] != "lake" {
			t.Errorf("all infos: %v", all)
		}
		if v, ok := all[flightsql.SqlInfoFlightSqlServerVersion].(string); !ok || v == "" {
			t.Errorf("server version %v", all[flightsql.SqlInfoFlightSqlServerVersion])
		}
	})
}

// sqlInfoValues decodes a GetSqlInfo result (info_name uint32, value dense
// union) into the scalar values it holds.
func sqlInfoValues(t *testing.T, recs []arrow.RecordBatch) map[flightsql.SqlInfo]any {
	t.Helper()
	out := map[flightsql.SqlInfo]any{}
	for _, r := range recs {
		names := r.Column(0).(*array.Uint32)
		values := r.Column(1).(*array.DenseUnion)
		for i := range names.Len() {
			child := values.Field(values.ChildID(i))
			off := int(values.ValueOffset(i))
			var v any
			switch c := child.(type) {
			case *array.String:
				v = c.Value(off)
			case *array.Boolean:
				v = c.Value(off)
			case *array.Int64:
				v = c.Value(off)
			case *array.Int32:
				v = c.Value(off)
			default:
				v = c.String()
			}
			out[flightsql.SqlInfo(names.Value(i))] = v
		}
	}
	return out
}
