package layout

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/lakedata/lake/wire"
)

// Prefixes of the metadata tree. Each ends in a slash, so it can be
// listed as is and never matches a sibling ("_lake/tablesx/").
const (
	Root          = "_lake/"
	CatalogPrefix = Root + "catalog/"
	TablesPrefix  = Root + "tables/"
)

// Directory names inside a table's prefix.
const (
	logDir        = "log"
	dataDir       = "data"
	checkpointDir = "checkpoints"
	metadataDir   = "metadata"
)

const (
	recordExt = ".json"
	dataExt   = ".parquet"
	// versionDigits is the width of a version in a key: zero-padded, so
	// a listing returns versions in order. 20 digits hold every int64.
	versionDigits = 20
)

// ErrNotLayout: a key that is not one of the layout's.
var ErrNotLayout = errors.New("layout: not a key of the stage layout")

// Kind says which part of the layout a key belongs to.
type Kind uint8

const (
	KindCatalog        Kind = iota + 1 // _lake/catalog/<name>.json
	KindLog                            // _lake/tables/<id>/log/<version>.json
	KindData                           // _lake/tables/<id>/data/<file>.parquet
	KindCheckpoint                     // _lake/tables/<id>/checkpoints/<version>.json
	KindMetadata                       // _lake/tables/<id>/metadata/<file>
	KindLastCheckpoint                 // _lake/tables/<id>/checkpoints/_last.json
)

func (k Kind) String() string {
	switch k {
	case KindCatalog:
		return "catalog"
	case KindLog:
		return "log"
	case KindData:
		return "data"
	case KindCheckpoint:
		return "checkpoint"
	case KindMetadata:
		return "metadata"
	case KindLastCheckpoint:
		return "last checkpoint"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// CatalogKey is the catalog entry of the table called name.
func CatalogKey(name string) string { return CatalogPrefix + name + recordExt }

// TablePrefix holds everything of the table with id tableID.
func TablePrefix(tableID string) string { return TablesPrefix + tableID + "/" }

// LogPrefix holds the table's log records, in version order.
func LogPrefix(tableID string) string { return TablePrefix(tableID) + logDir + "/" }

// LogKey is the log record of one version of a table. version must not be
// negative.
func LogKey(tableID string, version int64) string {
	return LogPrefix(tableID) + versionName(version) + recordExt
}

// DataPrefix holds the table's data files.
func DataPrefix(tableID string) string { return TablePrefix(tableID) + dataDir + "/" }

// DataKey is the data file called file (without .parquet) of a table.
func DataKey(tableID, file string) string { return DataPrefix(tableID) + file + dataExt }

// NewDataKey mints a data file key no other writer will choose: a UUIDv7,
// so a table's data files list roughly in the order they were written.
func NewDataKey(tableID string) string {
	return DataKey(tableID, uuid.Must(uuid.NewV7()).String())
}

// CheckpointPrefix holds the table's log checkpoints (DESIGN §9).
func CheckpointPrefix(tableID string) string { return TablePrefix(tableID) + checkpointDir + "/" }

// CheckpointKey is the checkpoint of a table's state at version.
func CheckpointKey(tableID string, version int64) string {
	return CheckpointPrefix(tableID) + versionName(version) + recordExt
}

// lastCheckpointFile is the one file of the checkpoint directory that is
// not a version: it cannot be one, since it does not start with a digit.
const lastCheckpointFile = "_last" + recordExt

// LastCheckpointKey names the newest checkpoint of a table, as Delta's
// _last_checkpoint does. It is overwritten, so it is only a hint: it may
// lag behind (a crash between a checkpoint and its hint) and readers read
// the log on from the version it names.
func LastCheckpointKey(tableID string) string {
	return CheckpointPrefix(tableID) + lastCheckpointFile
}

// MetadataPrefix holds the table's Iceberg metadata (DESIGN §14); the
// file names below it are Iceberg's.
func MetadataPrefix(tableID string) string { return TablePrefix(tableID) + metadataDir + "/" }

// MetadataKey is the Iceberg metadata file called file of a table.
func MetadataKey(tableID, file string) string { return MetadataPrefix(tableID) + file }

func versionName(version int64) string {
	return fmt.Sprintf("%0*d", versionDigits, version)
}

// Key is a parsed layout key.
type Key struct {
	Kind Kind
	// Name is the table name of a catalog entry.
	Name string
	// TableID is the table of every other kind.
	TableID string
	// Version is the version of a log record or a checkpoint.
	Version int64
	// File is a data file's name without .parquet, or a metadata file's
	// name.
	File string
}

// String is the key k came from: Parse(k.String()) == k for every k that
// Parse returned.
func (k Key) String() string {
	switch k.Kind {
	case KindCatalog:
		return CatalogKey(k.Name)
	case KindLog:
		return LogKey(k.TableID, k.Version)
	case KindData:
		return DataKey(k.TableID, k.File)
	case KindCheckpoint:
		return CheckpointKey(k.TableID, k.Version)
	case KindMetadata:
		return MetadataKey(k.TableID, k.File)
	case KindLastCheckpoint:
		return LastCheckpointKey(k.TableID)
	}
	return ""
}

// Parse reads a key of the layout. Anything else, including a key that
// is almost one (a version of 19 digits, a table name in upper case, a
// subdirectory), is ErrNotLayout, so a stray file in the stage is never
// taken for lake's own.
func Parse(key string) (Key, error) {
	bad := func(why string) (Key, error) {
		return Key{}, fmt.Errorf("%w: %q %s", ErrNotLayout, clip(key), why)
	}
	if err := wire.ValidateKey(key); err != nil {
		return bad("is not a clean stage key")
	}
	if rest, ok := strings.CutPrefix(key, CatalogPrefix); ok {
		name, ok := strings.CutSuffix(rest, recordExt)
		if !ok || wire.ValidateTableName(name) != nil {
			return bad("is not a catalog entry")
		}
		return Key{Kind: KindCatalog, Name: name}, nil
	}
	rest, ok := strings.CutPrefix(key, TablesPrefix)
	if !ok {
		return bad("is outside " + CatalogPrefix + " and " + TablesPrefix)
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 {
		return bad("is not <table id>/<kind>/<file> below " + TablesPrefix)
	}
	id, dir, file := parts[0], parts[1], parts[2]
	// ValidateKey already refused empty, "." and ".." segments.
	k := Key{TableID: id}
	switch dir {
	case checkpointDir:
		if file == lastCheckpointFile {
			k.Kind = KindLastCheckpoint
			break
		}
		fallthrough
	case logDir:
		v, ok := parseVersion(file)
		if !ok {
			return bad("does not name a version")
		}
		k.Kind, k.Version = KindLog, v
		if dir == checkpointDir {
			k.Kind = KindCheckpoint
		}
	case dataDir:
		name, ok := strings.CutSuffix(file, dataExt)
		if !ok || name == "" {
			return bad("is not a Parquet data file")
		}
		k.Kind, k.File = KindData, name
	case metadataDir:
		k.Kind, k.File = KindMetadata, file
	default:
		return bad("is in no directory of the layout")
	}
	return k, nil
}

// parseVersion reads exactly versionDigits decimal digits and ".json".
func parseVersion(file string) (int64, bool) {
	digits, ok := strings.CutSuffix(file, recordExt)
	if !ok || len(digits) != versionDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	return v, err == nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
