// Package objects owns the managed stage contract: the Store interface that
// every backend (objects/local, later objects/s3) implements, the sentinel
// errors that backends map their failures to, stage URIs, and the helpers
// that mint random immutable object keys.
//
// objects/objectstest.Run is the conformance suite every backend passes.
package objects
