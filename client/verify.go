package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/protobuf/proto"

	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// VerifyOptions configure Verify.
type VerifyOptions struct {
	// AllVersions checks the rows of every retained version, not only
	// those of the current one.
	AllVersions bool
	// Progress, when set, is told how far the run got after each of its
	// calls (every few seconds).
	Progress func(p *lakepb.VerifyProgress)
}

// VerifyReport is the outcome of a whole verify run.
type VerifyReport struct {
	Table       string
	Version     int64 // the version whose rows were checked
	AllVersions bool
	Objects     int64 // distinct objects checked
	BytesRead   int64 // bytes the service read from the stage
	// Mismatches lists every row whose FILE value its object contradicts,
	// in key order.
	Mismatches []*lakepb.VerifyMismatch
	Elapsed    time.Duration
}

// OK reports whether every object matched its rows.
func (r *VerifyReport) OK() bool { return len(r.Mismatches) == 0 }

// verifyAttempts bounds how often one call of a run is tried when the
// endpoint is unavailable; calls only read, so repeating one is safe.
const verifyAttempts = 5

// Verify has the metadata service read every object that table's rows
// point to and check its size and SHA-256 against what the rows claim (a
// FILE value's sha256 is its client's claim; a commit does not read the
// bytes). It always reads the objects again, an object named by several
// rows once. The service does the reading, in calls of a few seconds each,
// so the bytes never travel to this client.
func (c *Client) Verify(ctx context.Context, table string, o VerifyOptions) (*VerifyReport, error) {
	start := time.Now()
	rep := &VerifyReport{Table: table, AllVersions: o.AllVersions}
	req := &lakepb.VerifyRequest{Table: table, AllVersions: o.AllVersions}
	for {
		ms, prog, err := c.verifyCall(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("client: verify %s: %w", table, err)
		}
		rep.Mismatches = append(rep.Mismatches, ms...)
		rep.BytesRead += prog.GetBytesRead()
		rep.Version, rep.Objects = prog.GetVersion(), prog.GetObjects()
		if o.Progress != nil {
			o.Progress(prog)
		}
		if len(prog.GetNext()) == 0 {
			rep.Elapsed = time.Since(start)
			return rep, nil
		}
		req.Cursor = prog.GetNext()
	}
}

// verifyCall runs one call of a run, trying again while the endpoint is
// unavailable. A failed attempt's results are dropped, so a mismatch is
// never reported twice.
func (c *Client) verifyCall(ctx context.Context, req *lakepb.VerifyRequest) ([]*lakepb.VerifyMismatch, *lakepb.VerifyProgress, error) {
	body, err := proto.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 1; ; attempt++ {
		ms, prog, err := c.verifyAttempt(ctx, body)
		if err == nil || attempt == verifyAttempts || !retryable(err) || ctx.Err() != nil {
			return ms, prog, remoteError(err)
		}
		c.log.Debug("verify call failed; trying again", "attempt", attempt, "err", err)
		select {
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
	}
}

// errVerifyAnswer: the endpoint's answer to a verify call is not shaped as
// the protocol says (mismatches, then exactly one progress).
var errVerifyAnswer = errors.New("malformed lake.table.verify answer")

func (c *Client) verifyAttempt(ctx context.Context, body []byte) ([]*lakepb.VerifyMismatch, *lakepb.VerifyProgress, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.fc.DoAction(ctx, &flight.Action{Type: wire.ActionVerify, Body: body})
	if err != nil {
		return nil, nil, err
	}
	var ms []*lakepb.VerifyMismatch
	var prog *lakepb.VerifyProgress
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		if prog != nil {
			return nil, nil, fmt.Errorf("%w: a result after the progress", errVerifyAnswer)
		}
		var res lakepb.VerifyResult
		if err := proto.Unmarshal(r.GetBody(), &res); err != nil {
			return nil, nil, fmt.Errorf("%w: %v", errVerifyAnswer, err)
		}
		switch {
		case res.GetMismatch() != nil:
			ms = append(ms, res.GetMismatch())
		case res.GetProgress() != nil:
			prog = res.GetProgress()
		default:
			return nil, nil, fmt.Errorf("%w: an empty result", errVerifyAnswer)
		}
	}
	if prog == nil {
		return nil, nil, fmt.Errorf("%w: it ended without its progress", errVerifyAnswer)
	}
	return ms, prog, nil
}
