package meta

import (
	"fmt"

	"github.com/lakedata/lake/wire"
)

// ErrClosed: the service is shutting down. Over the wire it is
// wire.ErrClosed (Unavailable, SERVICE_CLOSED).
var ErrClosed = fmt.Errorf("meta: %w", wire.ErrClosed)

// statusErr turns err into the gRPC status the metadata service answers
// with: wire's error table (DESIGN §4), which keeps an existing status
// (the leader's answer to a forwarded call) as it is.
func statusErr(err error) error { return wire.ToStatus(err) }
