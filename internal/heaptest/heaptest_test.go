package heaptest

import (
	"runtime"
	"testing"
	"time"
)

// sink keeps what a test means to stay live out of the compiler's reach.
var sink []byte

const size = 32 << 20

// Live counts what stays and not what is dropped; the peaks count what
// a function held on its way, though it dropped it before returning.
func TestLiveAndPeaks(t *testing.T) {
	before := Live()
	sink = make([]byte, size)
	// Less what the runtime and the test binary freed meanwhile, a few
	// bytes to a few kilobytes: a hundredth is far more than that, and
	// far less than what is kept.
	if kept := int64(Live()) - int64(before); kept < size-size/100 {
		t.Errorf("Live grew by %d bytes keeping %d, want about that", kept, size)
	}
	sink = nil
	for _, tt := range []struct {
		name string
		peak func(func()) uint64
	}{{"PeakAlloc", PeakAlloc}, {"PeakInuse", PeakInuse}} {
		got := tt.peak(func() {
			b := make([]byte, size)
			time.Sleep(50 * time.Millisecond) // some 50 samples
			runtime.KeepAlive(b)
		})
		if got < size {
			t.Errorf("%s = %d holding %d bytes for a while, want at least that", tt.name, got, size)
		}
	}
	if got := PeakAlloc(func() {}); got > size/2 {
		t.Errorf("PeakAlloc of nothing = %d, want about 0", got)
	}
}

// A function that exits through t.Fatal's runtime.Goexit stops the
// sampling as well: no goroutine stays behind.
func TestPeakGoexit(t *testing.T) {
	n := runtime.NumGoroutine()
	done := make(chan struct{})
	go func() {
		defer close(done)
		PeakAlloc(runtime.Goexit)
	}()
	<-done
	for deadline := time.Now().Add(time.Minute); runtime.NumGoroutine() > n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines a minute after the peak exited, want %d", runtime.NumGoroutine(), n)
		}
	}
}
