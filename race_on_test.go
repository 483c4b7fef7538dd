//go:build race

package protect_test

// raceEnabled reports whether the race detector is on: it slows a large
// load past its deadline and changes what the heap holds.
const raceEnabled = true
