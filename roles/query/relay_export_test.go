package query

// RelayHeld is the bytes of append frames the relay holds right now.
func RelayHeld(s *Service) int64 { return s.relay.held.Load() }
