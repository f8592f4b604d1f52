// Package objects owns the managed stage contract: the Store interface that
// every backend (objects/local for a directory, objects/s3 for a bucket)
// implements, the optional capabilities a backend may add (Resumer for
// uploads that resume after a crash, Preparer for writing a record before
// publishing it), the sentinel errors that backends map their failures to,
// stage URIs, and the helpers that mint random immutable object keys.
//
// A capability is found by a type assertion on its interface, never on a
// backend's type, so any store that implements the interface offers it, a
// wrapper around a backend included.
//
// objects/objectstest.Run is the conformance suite every backend passes;
// it runs the tests of a capability only against backends that have it.
// objects/stageopen opens the backend a stage descriptor names.
package objects
