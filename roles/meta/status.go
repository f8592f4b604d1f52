package meta

import (
	"context"
	"sort"

	"github.com/lakedata/lake/roles/meta/cluster"
	"github.com/lakedata/lake/wire/lakepb"
)

// Status reports the cluster as this node sees it: the leader, the members
// and how far each is behind the leader. This node's own numbers are live;
// the others' are what they last published (a fraction of a second old).
// When etcd cannot be read the answer still names this node, with Error set.
func (s *Service) Status(ctx context.Context) *lakepb.ClusterStatus {
	self := s.cluster.Self()
	st := &lakepb.ClusterStatus{Leader: s.cluster.Leader(), AnsweredBy: self, AcceptingWrites: s.canCommit()}
	_, st.Clustered = s.cluster.(*cluster.Etcd)
	members, err := s.cluster.Members(ctx)
	if err != nil {
		st.Error = err.Error()
		members = []cluster.Member{{Addr: self, Leader: s.canCommit()}}
	}
	own := s.reg.counts()
	var leaderVersions int64 = -1
	for i := range members {
		m := &members[i]
		if m.Addr == self {
			m.Report = own
		}
		if m.Leader {
			leaderVersions = m.Report.Versions
			st.Leader = m.Addr
		}
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Addr < members[j].Addr })
	for _, m := range members {
		ms := &lakepb.MemberStatus{
			Addr: m.Addr, Leader: m.Leader, Tables: int64(m.Report.Tables), Versions: m.Report.Versions,
			StartedUnixMicros: m.Started.UnixMicro(), UpdatedUnixMicros: m.Updated.UnixMicro(),
		}
		if leaderVersions >= 0 && !m.Leader {
			ms.Lag = max(0, leaderVersions-m.Report.Versions)
		}
		st.Members = append(st.Members, ms)
	}
	return st
}
