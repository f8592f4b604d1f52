package wire

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/lakedata/lake/wire/lakepb"
)

// Flight action types answered by the metadata service and relayed by the
// query service. Bodies are the lakepb messages that Actions names for
// each.
const (
	ActionCreateTable   = "lake.table.create"
	ActionListTables    = "lake.table.list"
	ActionDescribeTable = "lake.table.describe"
	ActionHistory       = "lake.table.history"
	ActionSnapshot      = "lake.table.snapshot"
	ActionDiscover      = "lake.discover"
	ActionStatus        = "lake.status"
	ActionVerify        = "lake.table.verify"
	ActionCompact       = "lake.table.compact"
	ActionDelete        = "lake.table.delete"
	ActionExpire        = "lake.table.expire"
	ActionGC            = "lake.gc"
	ActionURL           = "lake.table.url"

	ActionUploadGrant    = "lake.upload.grant"
	ActionUploadRenew    = "lake.upload.renew"
	ActionUploadComplete = "lake.upload.complete"
	ActionUploadAbort    = "lake.upload.abort"
)

// Scope is what a bearer token must allow for a call (DESIGN §12). The
// scopes nest: a write token may do everything a read token may, an admin
// token everything.
type Scope uint8

const (
	// ScopeRead: SQL, the catalog, describe, list, history, status, get,
	// read URLs.
	ScopeRead Scope = iota + 1
	// ScopeWrite: read, plus put, append, delete and upload grants.
	ScopeWrite
	// ScopeAdmin: everything, among it create, expire, compact and gc.
	ScopeAdmin
)

func (s Scope) String() string {
	switch s {
	case ScopeRead:
		return "read"
	case ScopeWrite:
		return "write"
	case ScopeAdmin:
		return "admin"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Allows reports whether a token of scope s may make a call that needs
// need. The zero Scope allows nothing.
func (s Scope) Allows(need Scope) bool {
	return s >= ScopeRead && s <= ScopeAdmin && need >= ScopeRead && s >= need
}

// ActionSpec describes one DoAction type: everything the roles decide
// about an action by its name alone comes from here, so that adding an
// action is one entry in Actions and one handler in the metadata service.
type ActionSpec struct {
	Name string
	// Request is the type of Action.body; Response the type of every
	// Result.body.
	Request, Response protoreflect.MessageType
	// Stream says the answer is several results (lake.table.verify), not
	// exactly one.
	Stream bool
	// Mutates says the action changes the catalog or a table: a follower
	// forwards it to the leader instead of answering it.
	Mutates bool
	// AnsweredByQuery says the query role answers the action from its own
	// state; every other action it relays to the metadata service as is.
	AnsweredByQuery bool
	// Scope is the token scope the action needs.
	Scope Scope
	// Long says one call may take as long as its work (a compaction, a
	// delete that rewrites files, a garbage collection): a role relaying
	// or forwarding it bounds it by the caller's deadline only, not by
	// the few seconds a frozen peer is given otherwise.
	Long bool
	// Description is one line for ListActions, without a final period.
	Description string
}

// Signature names the action's body types, as "HistoryRequest → History";
// a streamed answer reads "VerifyRequest → VerifyResult stream".
func (a ActionSpec) Signature() string {
	s := fmt.Sprintf("%s → %s", a.Request.Descriptor().Name(), a.Response.Descriptor().Name())
	if a.Stream {
		s += " stream"
	}
	return s
}

// Summary is the ListActions description: the line and the signature.
func (a ActionSpec) Summary() string {
	return fmt.Sprintf("%s (%s).", a.Description, a.Signature())
}

func msg(m interface{ ProtoReflect() protoreflect.Message }) protoreflect.MessageType {
	return m.ProtoReflect().Type()
}

// actions is the action table, in ListActions order. Read actions answer
// from a node's own index, so followers serve them; the scopes are
// DESIGN §12's.
var actions = []ActionSpec{
	{
		Name: ActionCreateTable, Request: msg(&lakepb.CreateTableRequest{}), Response: msg(&lakepb.TableInfo{}),
		Mutates: true, Scope: ScopeAdmin, Description: "Create a table",
	},
	{
		Name: ActionListTables, Request: msg(&lakepb.ListTablesRequest{}), Response: msg(&lakepb.TableList{}),
		Scope: ScopeRead, Description: "List tables",
	},
	{
		Name: ActionDescribeTable, Request: msg(&lakepb.DescribeTableRequest{}), Response: msg(&lakepb.TableInfo{}),
		Scope: ScopeRead, Description: "Describe a table",
	},
	{
		Name: ActionHistory, Request: msg(&lakepb.HistoryRequest{}), Response: msg(&lakepb.History{}),
		Scope: ScopeRead, Description: "A table's versions, newest first",
	},
	{
		Name: ActionSnapshot, Request: msg(&lakepb.SnapshotRequest{}), Response: msg(&lakepb.Snapshot{}),
		Scope: ScopeRead, Description: "The data files of a table version",
	},
	{
		// Read, because a read token may get files and so must find the
		// stage; the descriptor never holds credentials.
		Name: ActionDiscover, Request: msg(&lakepb.DiscoverRequest{}), Response: msg(&lakepb.StageDescriptor{}),
		AnsweredByQuery: true, Scope: ScopeRead, Description: "Where clients upload file bytes",
	},
	{
		Name: ActionStatus, Request: msg(&lakepb.StatusRequest{}), Response: msg(&lakepb.ClusterStatus{}),
		Scope: ScopeRead, Description: "The metadata cluster: leader, members, lag",
	},
	{
		// Not a mutation: any node answers any call of a run (the run's
		// state travels in the cursor), and what the leader's background
		// verifier records is its own business.
		Name: ActionVerify, Request: msg(&lakepb.VerifyRequest{}), Response: msg(&lakepb.VerifyResult{}),
		Stream: true, Scope: ScopeRead,
		Description: "Check a table's objects against their rows' size and sha256, a few seconds per call",
	},
	{
		// Read: whoever may get an object may have a URL that gets it.
		// Any node answers: it signs with the stage's credentials and
		// changes nothing.
		Name: ActionURL, Request: msg(&lakepb.ObjectUrlRequest{}), Response: msg(&lakepb.ObjectUrl{}),
		Scope: ScopeRead, Description: "A URL that reads one object of a table without lake or stage credentials, for a while",
	},
	{
		// Grants run on the leader, like every write, so one node's
		// configuration (part size, expiry, mode) decides them.
		Name: ActionUploadGrant, Request: msg(&lakepb.UploadGrantRequest{}), Response: msg(&lakepb.UploadGrant{}),
		Mutates: true, Scope: ScopeWrite, Description: "Start an upload at a key the service chooses, with presigned part URLs",
	},
	{
		Name: ActionUploadRenew, Request: msg(&lakepb.UploadRenewRequest{}), Response: msg(&lakepb.UploadUrls{}),
		Mutates: true, Scope: ScopeWrite, Description: "Fresh part URLs of a granted upload",
	},
	{
		Name: ActionUploadComplete, Request: msg(&lakepb.UploadCompleteRequest{}), Response: msg(&lakepb.UploadedFile{}),
		Mutates: true, Long: true, Scope: ScopeWrite, Description: "Check a granted upload's parts and publish the object",
	},
	{
		Name: ActionUploadAbort, Request: msg(&lakepb.UploadAbortRequest{}), Response: msg(&lakepb.UploadAborted{}),
		Mutates: true, Scope: ScopeWrite, Description: "Drop a granted upload and its parts",
	},
	{
		Name: ActionCompact, Request: msg(&lakepb.CompactRequest{}), Response: msg(&lakepb.CompactResult{}),
		Mutates: true, Long: true, Scope: ScopeAdmin, Description: "Merge a table's small data files into large ones now",
	},
	{
		Name: ActionDelete, Request: msg(&lakepb.DeleteRequest{}), Response: msg(&lakepb.DeleteResult{}),
		Mutates: true, Long: true, Scope: ScopeWrite, Description: "Delete the rows whose FILE value has one of the keys, as one new version",
	},
	{
		Name: ActionExpire, Request: msg(&lakepb.ExpireRequest{}), Response: msg(&lakepb.ExpireResult{}),
		Mutates: true, Scope: ScopeAdmin, Description: "Make a table's old versions unreadable, so garbage collection may free what only they use",
	},
	{
		// Mutates: it runs on the leader, the only node whose fence
		// every append passes.
		Name: ActionGC, Request: msg(&lakepb.GcRequest{}), Response: msg(&lakepb.GcResult{}),
		Mutates: true, Long: true, Scope: ScopeAdmin, Description: "Free the data files, objects and leftovers no retained version references",
	},
}

// Actions returns the action table in ListActions order.
func Actions() []ActionSpec { return slices.Clone(actions) }

// LookupAction returns the entry of the action called name.
func LookupAction(name string) (ActionSpec, bool) {
	for _, a := range actions {
		if a.Name == name {
			return a, true
		}
	}
	return ActionSpec{}, false
}
