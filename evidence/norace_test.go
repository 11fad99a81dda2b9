//go:build !race

package evidence

const raceEnabled = false
