//go:build !failpoints

package failpoint

// Hit does nothing: this binary was built without the failpoints tag. It
// reads no environment, so LAKE_FAILPOINTS cannot stop or kill it.
func Hit(string) {}
