package client

import (
	"context"
	"fmt"
	"time"
)

// retryAmbiguous runs call until it succeeds, fails for good, or
// appendRetryFor has passed. A failure that leaves the outcome unknown
// (Unavailable, DeadlineExceeded: a failover, a lost answer) is resent
// with a growing pause; call must carry a commit id, so a resend that
// meets a commit which did happen is answered duplicate instead of
// committing twice. what names the call in errors and logs.
func (c *Client) retryAmbiguous(ctx context.Context, what, commitID string, call func() error) error {
	giveUp := time.Now().Add(appendRetryFor)
	pause := appendBackoff
	for attempt := 1; ; attempt++ {
		err := call()
		if err == nil {
			return nil
		}
		err = remoteError(err)
		if !retryable(err) || ctx.Err() != nil || time.Now().Add(pause).After(giveUp) {
			return fmt.Errorf("client: %s: %w", what, err)
		}
		c.log.Warn("call failed; resending with the same commit id",
			"call", what, "commit_id", commitID, "attempt", attempt, "pause", pause, "err", err)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return fmt.Errorf("client: %s: %w (after: %v)", what, ctx.Err(), err)
		}
		pause = min(2*pause, appendMaxBackoff)
	}
}
