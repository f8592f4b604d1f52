// Package objectstest is the conformance suite for objects.Store backends.
// Every backend's tests call Run with a constructor for fresh, empty stores,
// so local and S3 are held to the same contract: atomic publication,
// cancelled and failed uploads that leave nothing behind, path uploads,
// progress reports, put-if-absent with exactly one winner, range reads,
// prefix listing in key order, key validation, and a Close that may run
// twice. A backend that offers objects.Resumer is also held to its
// contract (resumed after a cancel, found completed when done, listed and
// cancelled per stage); for one without it those tests are skipped.
// RunWith adds what only some backends have: entries planted behind the
// store's back (symbolic links, named pipes) that Stat, Open and List must
// not take for objects.
package objectstest
