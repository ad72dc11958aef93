package recorder

// MemoryThreadCount reports how many threads s holds in memory, expired ones included.
func MemoryThreadCount(s *MemoryStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.threads)
}
