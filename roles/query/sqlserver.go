package query

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql"
	"github.com/apache/arrow-go/v18/arrow/flight/flightsql/schema_ref"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lakedata/lake/wire"
)

// Names the SQL clients see.
const (
	catalogName = "lake"
	schemaName  = "main"
	tableType   = "TABLE"
)

// maxQueryBytes bounds the SQL text of one statement.
const maxQueryBytes = 1 << 20

// handlePrefix marks statement and prepared-statement handles: they carry
// the SQL itself, so any query node can serve them.
const handlePrefix = "lake.sql.v1:"

func encodeHandle(q string) []byte { return []byte(handlePrefix + q) }

func decodeHandle(h []byte) (string, error) {
	q, ok := strings.CutPrefix(string(h), handlePrefix)
	if !ok {
		return "", fmt.Errorf("%w: unknown statement handle", wire.ErrInvalidRequest)
	}
	return q, nil
}

// sqlServer answers the Flight SQL commands; see Service for the rest.
type sqlServer struct {
	flightsql.BaseServer
	svc *Service
}

func newSQLServer(svc *Service, version string) (*sqlServer, error) {
	s := &sqlServer{svc: svc}
	s.Alloc = memory.DefaultAllocator
	infos := map[flightsql.SqlInfo]any{
		flightsql.SqlInfoFlightSqlServerName:         "lake",
		flightsql.SqlInfoFlightSqlServerVersion:      version,
		flightsql.SqlInfoFlightSqlServerArrowVersion: "18",
		flightsql.SqlInfoFlightSqlServerReadOnly:     true,
		flightsql.SqlInfoFlightSqlServerSql:          true,
		flightsql.SqlInfoFlightSqlServerSubstrait:    false,
		flightsql.SqlInfoFlightSqlServerTransaction:  int32(0), // SqlSupportedTransaction_NONE
		flightsql.SqlInfoFlightSqlServerCancel:       false,
		flightsql.SqlInfoDDLCatalog:                  false,
		flightsql.SqlInfoDDLSchema:                   false,
		flightsql.SqlInfoDDLTable:                    false,
		flightsql.SqlInfoIdentifierQuoteChar:         `"`,
		flightsql.SqlInfoTransactionsSupported:       false,
	}
	for id, v := range infos {
		if err := s.RegisterSqlInfo(id, v); err != nil {
			return nil, fmt.Errorf("query: sql info %v: %w", id, err)
		}
	}
	return s, nil
}

func checkQueryText(q string) error {
	if strings.TrimSpace(q) == "" {
		return fmt.Errorf("%w: empty query", wire.ErrInvalidRequest)
	}
	if len(q) > maxQueryBytes {
		return fmt.Errorf("%w: query of %d bytes, at most %d", wire.ErrInvalidRequest, len(q), maxQueryBytes)
	}
	return nil
}

func statementInfo(q string, desc *flight.FlightDescriptor, schema *arrow.Schema) (*flight.FlightInfo, error) {
	tkt, err := flightsql.CreateStatementQueryTicket(encodeHandle(q))
	if err != nil {
		return nil, err
	}
	info := &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: tkt}}},
		FlightDescriptor: desc,
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
	if schema != nil {
		info.Schema = flight.SerializeSchema(schema, memory.DefaultAllocator)
	}
	return info, nil
}

func (s *sqlServer) GetFlightInfoStatement(ctx context.Context, cmd flightsql.StatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	q := cmd.GetQuery()
	if err := s.svc.validate(ctx, q); err != nil {
		return nil, statusErr(err)
	}
	return statementInfo(q, desc, nil)
}

func (s *sqlServer) GetSchemaStatement(ctx context.Context, cmd flightsql.StatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	schema, err := s.svc.resultSchema(ctx, cmd.GetQuery())
	if err != nil {
		return nil, statusErr(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema, memory.DefaultAllocator)}, nil
}

func (s *sqlServer) DoGetStatement(ctx context.Context, tkt flightsql.StatementQueryTicket) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	q, err := decodeHandle(tkt.GetStatementHandle())
	if err != nil {
		return nil, nil, statusErr(err)
	}
	schema, ch, err := s.svc.run(ctx, q)
	return schema, ch, statusErr(err)
}

func (s *sqlServer) CreatePreparedStatement(ctx context.Context, req flightsql.ActionCreatePreparedStatementRequest) (flightsql.ActionCreatePreparedStatementResult, error) {
	q := req.GetQuery()
	schema, err := s.svc.resultSchema(ctx, q)
	if err != nil {
		return flightsql.ActionCreatePreparedStatementResult{}, statusErr(err)
	}
	return flightsql.ActionCreatePreparedStatementResult{Handle: encodeHandle(q), DatasetSchema: schema}, nil
}

// ClosePreparedStatement has nothing to free: handles carry their SQL.
func (s *sqlServer) ClosePreparedStatement(context.Context, flightsql.ActionClosePreparedStatementRequest) error {
	return nil
}

func (s *sqlServer) GetFlightInfoPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	q, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, statusErr(err)
	}
	if err := s.svc.validate(ctx, q); err != nil {
		return nil, statusErr(err)
	}
	return statementInfo(q, desc, nil)
}

func (s *sqlServer) GetSchemaPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery, _ *flight.FlightDescriptor) (*flight.SchemaResult, error) {
	q, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, statusErr(err)
	}
	schema, err := s.svc.resultSchema(ctx, q)
	if err != nil {
		return nil, statusErr(err)
	}
	return &flight.SchemaResult{Schema: flight.SerializeSchema(schema, memory.DefaultAllocator)}, nil
}

func (s *sqlServer) DoGetPreparedStatement(ctx context.Context, cmd flightsql.PreparedStatementQuery) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	q, err := decodeHandle(cmd.GetPreparedStatementHandle())
	if err != nil {
		return nil, nil, statusErr(err)
	}
	schema, ch, err := s.svc.run(ctx, q)
	return schema, ch, statusErr(err)
}

func infoFor(desc *flight.FlightDescriptor, schema *arrow.Schema) *flight.FlightInfo {
	return &flight.FlightInfo{
		Endpoint:         []*flight.FlightEndpoint{{Ticket: &flight.Ticket{Ticket: desc.Cmd}}},
		FlightDescriptor: desc,
		Schema:           flight.SerializeSchema(schema, memory.DefaultAllocator),
		TotalRecords:     -1,
		TotalBytes:       -1,
	}
}

// oneBatch streams a single record.
func oneBatch(rec arrow.RecordBatch) <-chan flight.StreamChunk {
	ch := make(chan flight.StreamChunk, 1)
	ch <- flight.StreamChunk{Data: rec}
	close(ch)
	return ch
}

func stringColumn(values []string) arrow.Array {
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	b.AppendValues(values, nil)
	return b.NewArray()
}

func (s *sqlServer) GetFlightInfoCatalogs(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return infoFor(desc, schema_ref.Catalogs), nil
}

func (s *sqlServer) DoGetCatalogs(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	col := stringColumn([]string{catalogName})
	defer col.Release()
	return schema_ref.Catalogs, oneBatch(array.NewRecordBatch(schema_ref.Catalogs, []arrow.Array{col}, 1)), nil
}

func (s *sqlServer) GetFlightInfoSchemas(_ context.Context, _ flightsql.GetDBSchemas, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return infoFor(desc, schema_ref.DBSchemas), nil
}

func (s *sqlServer) DoGetDBSchemas(_ context.Context, cmd flightsql.GetDBSchemas) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	var cats, schemas []string
	if catalogMatches(cmd.GetCatalog()) && likeMatch(cmd.GetDBSchemaFilterPattern(), schemaName) {
		cats, schemas = []string{catalogName}, []string{schemaName}
	}
	c1, c2 := stringColumn(cats), stringColumn(schemas)
	defer c1.Release()
	defer c2.Release()
	return schema_ref.DBSchemas, oneBatch(array.NewRecordBatch(schema_ref.DBSchemas, []arrow.Array{c1, c2}, int64(len(cats)))), nil
}

func (s *sqlServer) GetFlightInfoTables(_ context.Context, cmd flightsql.GetTables, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	if cmd.GetIncludeSchema() {
		return infoFor(desc, schema_ref.TablesWithIncludedSchema), nil
	}
	return infoFor(desc, schema_ref.Tables), nil
}

func (s *sqlServer) DoGetTables(ctx context.Context, cmd flightsql.GetTables) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	tables, err := s.svc.cat.refresh(ctx)
	if err != nil {
		return nil, nil, statusErr(err)
	}
	typeOK := len(cmd.GetTableTypes()) == 0
	for _, t := range cmd.GetTableTypes() {
		typeOK = typeOK || strings.EqualFold(t, tableType)
	}
	var names []string
	var schemas [][]byte
	if typeOK && catalogMatches(cmd.GetCatalog()) && likeMatch(cmd.GetDBSchemaFilterPattern(), schemaName) {
		for _, t := range tables {
			if likeMatch(cmd.GetTableNameFilterPattern(), t.Name) {
				names = append(names, t.Name)
				schemas = append(schemas, t.Schema)
			}
		}
	}
	n := len(names)
	cats, dbs, types := make([]string, n), make([]string, n), make([]string, n)
	for i := range n {
		cats[i], dbs[i], types[i] = catalogName, schemaName, tableType
	}
	cols := []arrow.Array{stringColumn(cats), stringColumn(dbs), stringColumn(names), stringColumn(types)}
	schema := schema_ref.Tables
	if cmd.GetIncludeSchema() {
		schema = schema_ref.TablesWithIncludedSchema
		b := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
		b.AppendValues(schemas, nil)
		cols = append(cols, b.NewArray())
		b.Release()
	}
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	return schema, oneBatch(array.NewRecordBatch(schema, cols, int64(n))), nil
}

func (s *sqlServer) GetFlightInfoTableTypes(_ context.Context, desc *flight.FlightDescriptor) (*flight.FlightInfo, error) {
	return infoFor(desc, schema_ref.TableTypes), nil
}

func (s *sqlServer) DoGetTableTypes(context.Context) (*arrow.Schema, <-chan flight.StreamChunk, error) {
	col := stringColumn([]string{tableType})
	defer col.Release()
	return schema_ref.TableTypes, oneBatch(array.NewRecordBatch(schema_ref.TableTypes, []arrow.Array{col}, 1)), nil
}

// catalogMatches applies a Flight SQL catalog filter: nil matches all, ""
// means "tables without a catalog", of which lake has none.
func catalogMatches(c *string) bool { return c == nil || *c == catalogName }

// likeMatch applies a Flight SQL filter pattern (SQL LIKE: % and _) to s;
// nil matches everything.
func likeMatch(pattern *string, s string) bool {
	if pattern == nil {
		return true
	}
	var re strings.Builder
	re.WriteString("^")
	for _, r := range *pattern {
		switch r {
		case '%':
			re.WriteString(".*")
		case '_':
			re.WriteString(".")
		default:
			re.WriteString(regexp.QuoteMeta(string(r)))
		}
	}
	re.WriteString("$")
	ok, err := regexp.MatchString(re.String(), s)
	return err == nil && ok
}
