package main

import (
	"io"
	"sync"
)

// syncWriter serializes the writes of the planner and of the coder, which
// runs in the server's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
