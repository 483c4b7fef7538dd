//go:build race

package protect

// raceEnabled reports whether the race detector is on: it slows a large
// load past its deadline and changes what the heap holds.
const raceEnabled = true
