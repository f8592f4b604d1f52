package wire

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lakedata/lake/wire/lakepb"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpora in testdata/fuzz")

// TestSeedCorpus writes the named seed files of testdata/fuzz with
// -update-corpus. The fuzz targets run every file there as a plain test
// case on each `go test`.
//
//	go test ./wire -run TestSeedCorpus -update-corpus
func TestSeedCorpus(t *testing.T) {
	if !*updateCorpus {
		t.Skip("run with -update-corpus to rewrite testdata/fuzz")
	}
	appendCmd := func(a *lakepb.Append) []byte {
		b, err := EncodeAppend(a)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sql := flightSQLCommands(t)
	defaultSchema := EncodeSchema(DefaultSchema())

	wrongWireType := protowire.AppendTag(anyOfRaw(1, []byte("videos")), 3, protowire.Fixed64Type)
	wrongWireType = protowire.AppendFixed64(wrongWireType, 1)

	writeBytes(t, "FuzzDecodeAppend", map[string][]byte{
		"valid_table_only":               appendCmd(&lakepb.Append{Table: "videos"}),
		"valid_all_fields":               appendCmd(&lakepb.Append{Table: "videos", CommitId: "upload-1", ExpectedVersion: proto.Int64(4)}),
		"valid_expected_version_0":       appendCmd(&lakepb.Append{Table: "t", ExpectedVersion: proto.Int64(0)}),
		"flightsql_statement_query":      sql["CommandStatementQuery"],
		"flightsql_statement_update":     sql["CommandStatementUpdate"],
		"flightsql_statement_ingest":     sql["CommandStatementIngest"],
		"flightsql_prepared_query":       sql["CommandPreparedStatementQuery"],
		"garbage":                        []byte("\xff\xfe not protobuf \x00"),
		"truncated":                      appendCmd(&lakepb.Append{Table: "videos", CommitId: "c"})[:9],
		"raw_append_not_wrapped":         mustMarshal(t, &lakepb.Append{Table: "videos", CommitId: "c", ExpectedVersion: proto.Int64(1)}),
		"empty_type_url":                 mustMarshal(t, &anypb.Any{Value: mustMarshal(t, &lakepb.Append{Table: "videos"})}),
		"expected_version_wrong_type":    mustMarshal(t, &anypb.Any{TypeUrl: AppendTypeURL, Value: wrongWireType}),
		"commit_id_too_long":             mustMarshal(t, &anypb.Any{TypeUrl: AppendTypeURL, Value: mustMarshal(t, &lakepb.Append{Table: "t", CommitId: strings.Repeat("c", MaxCommitIDLen+1)})}),
		"default_schema_not_a_command":   defaultSchema,
		"negative_expected_version":      mustMarshal(t, &anypb.Any{TypeUrl: AppendTypeURL, Value: mustMarshal(t, &lakepb.Append{Table: "t", ExpectedVersion: proto.Int64(-1)})}),
		"flightsql_prepared_update":      sql["CommandPreparedStatementUpdate"],
		"append_result_not_a_command":    mustMarshal(t, &lakepb.AppendResult{Table: "videos", Version: 2, Rows: 1}),
		"type_url_without_host_and_data": mustMarshal(t, &anypb.Any{TypeUrl: "lake.file.Append", Value: mustMarshal(t, &lakepb.Append{Table: "t"})}),
	})

	writeBytes(t, "FuzzDecodeSchema", map[string][]byte{
		"default_schema": defaultSchema,
		"nested_types": EncodeSchema(arrow.NewSchema([]arrow.Field{
			FileField("file", false),
			{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
			{Name: "attrs", Type: arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64)},
			{Name: "kind", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
			{Name: "u", Type: arrow.DenseUnionOf([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, []arrow.UnionTypeCode{3})},
			{Name: "ny", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "America/New_York"}},
		}, nil)),
		"garbage":              []byte("not an arrow schema"),
		"append_command":       appendCmd(&lakepb.Append{Table: "videos"}),
		"metadata_length_2gib": {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		"body_length_32tib":    ipcFrame(setBodyLength(t, 1<<45)),
		"fields_length_huge": func() []byte {
			w, _ := schemaMessage(0xFFFFFFF0, 0)
			return ipcFrame(w.b)
		}(),
		"field_self_cycle": func() []byte {
			w, el := schemaMessage(1, 1)
			s, ch := w.field("s", fbTypeStruct, true)
			w.ref(el[0], s)
			v, ce := w.vector(1, 1)
			w.ref(ch, v)
			w.ref(ce[0], s)
			return ipcFrame(w.b)
		}(),
		"hand_made_valid": func() []byte {
			w, el := schemaMessage(1, 1)
			s, ch := w.field("s", fbTypeStruct, true)
			w.ref(el[0], s)
			v, ce := w.vector(1, 1)
			w.ref(ch, v)
			c, _ := w.field("c", fbTypeUtf8, false)
			w.ref(ce[0], c)
			return ipcFrame(w.b)
		}(),
	})

	writeStrings(t, "FuzzValidateTableName", map[string]string{
		"valid":         "videos",
		"underscore":    "_tmp_1",
		"max_len":       strings.Repeat("a", MaxTableNameLen),
		"too_long":      strings.Repeat("a", MaxTableNameLen+1),
		"uppercase":     "Videos",
		"leading_digit": "1videos",
		"dash":          "a-b",
		"space":         "my videos",
		"unicode":       "vidéos",
		"nul":           "a\x00",
		"empty":         "",
	})
	writeStrings(t, "FuzzValidateObjectKey", map[string]string{
		"valid":         "objects/ab/cd/video.mp4",
		"dot_dot":       "objects/../_lake/catalog",
		"absolute":      "/objects/a",
		"backslash":     `objects\..\a`,
		"nul":           "objects/a\x00",
		"outside":       "_lake/tables/t/log/00000000000000000001.json",
		"empty_segment": "objects//a",
	})
}

func writeBytes(t *testing.T, target string, seeds map[string][]byte) {
	t.Helper()
	files := make(map[string]string, len(seeds))
	for name, b := range seeds {
		files[name] = fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
	}
	writeCorpus(t, target, files)
}

func writeStrings(t *testing.T, target string, seeds map[string]string) {
	t.Helper()
	files := make(map[string]string, len(seeds))
	for name, s := range seeds {
		files[name] = fmt.Sprintf("go test fuzz v1\nstring(%q)\n", s)
	}
	writeCorpus(t, target, files)
}

func writeCorpus(t *testing.T, target string, files map[string]string) {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
