package recorder

// MemoryThreadCount reports how many threads s holds in memory, expired ones included.
func MemoryThreadCount(s *MemoryStore) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.threads)
}

// IndexTag exposes the hash naming an owner's thread index on a route.
var IndexTag = indexTag
