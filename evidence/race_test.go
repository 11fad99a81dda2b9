//go:build race

package evidence

// raceEnabled: the race detector makes sync.Pool drop what is put in it at
// random, so the regexp package's pooled matchers are allocated again on a
// quarter of the matches, and allocation measures the detector, not the
// program.
const raceEnabled = true
