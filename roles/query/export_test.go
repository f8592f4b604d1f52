package query

// EngineScalar runs a trusted statement straight on s's engine, around
// every check, for tests that look at the engine's own state.
func EngineScalar(s *Service, q string) (any, error) {
	var v any
	err := s.eng.db.QueryRow(q).Scan(&v)
	return v, err
}

// EnginePeakRSS is the largest resident size the memory watchdog saw.
func EnginePeakRSS(s *Service) int64 {
	s.eng.watch.mu.Lock()
	defer s.eng.watch.mu.Unlock()
	return s.eng.watch.peak
}

// EngineIdleConns is how many engine connections wait in the pool for
// reuse (always 0: every statement gets a fresh one).
func EngineIdleConns(s *Service) int { return s.eng.db.Stats().Idle }

// VersionViews lists the views of old versions s keeps for time travel.
func VersionViews(s *Service) []string { return s.cat.versionViewNames() }

// SetVersionViewLimit bounds the views of old versions s keeps.
func SetVersionViewLimit(s *Service, n int) {
	s.cat.mu.Lock()
	defer s.cat.mu.Unlock()
	s.cat.maxOld = n
}
