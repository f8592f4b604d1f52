package query

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/lakedata/lake/internal/flightrpc"
	"github.com/lakedata/lake/wire"
	"github.com/lakedata/lake/wire/lakepb"
)

// probeTimeout bounds the probe of one meta node; a node that does not
// answer in time is simply not judged.
const probeTimeout = 3 * time.Second

// warnIfMetaOpen asks every meta node once, without this node's token,
// where the stage is. A node that answers accepts anyone's calls: the
// tokens on this node then guard nothing, since whoever reaches meta can
// create tables and append there directly. Only a node that presents a
// token is checked; one without expects an open meta.
func (s *Service) warnIfMetaOpen(ctx context.Context) {
	if s.cfg.MetaDial.Token == "" {
		return
	}
	anon := s.cfg.MetaDial
	anon.Token = ""
	var wg sync.WaitGroup
	for _, ep := range s.meta.Endpoints() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fc, err := flightrpc.DialEndpoint(ep, anon)
			if err != nil {
				return
			}
			defer fc.Close()
			ctx, cancel := context.WithTimeout(ctx, probeTimeout)
			defer cancel()
			err = flightrpc.Action(ctx, fc, wire.ActionDiscover, &lakepb.DiscoverRequest{}, &lakepb.StageDescriptor{})
			switch {
			case err == nil:
				s.log.Warn("the metadata service answers calls without a token: anyone who can reach it can create tables and append there, whatever this node's tokens", "meta", ep)
			case status.Code(err) != codes.Unauthenticated:
				s.log.Debug("could not check whether meta requires a token", "meta", ep, "err", err)
			}
		}()
	}
	wg.Wait()
}
