package main

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/httpprotect/protect/internal/heaptest"
)

// A trusted gateway that sends 20,000 distinct 60 KB consumer ids grows
// protectd's heap by less than 50 MB: what protectd keeps of a consumer
// (the cache of its key, its plan state) is the same size however long
// its id, never the id itself (1.2 GB here).
func TestConsumerIDsBoundedInBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("hashes 1.2 GB of consumer ids")
	}
	h, _ := testVerifier(t, trusted, plans)
	base := strings.Repeat("k", 60<<10)
	before := heaptest.Live()
	for i := range 20_000 {
		id := strconv.Itoa(i) + base[len(strconv.Itoa(i)):]
		if w := ask(h, "GET", "/verify", proxy, "X-Forwarded-For", "203.0.113.7", hdrConsumer, id, hdrPlan, "pro"); w.Code != 200 {
			t.Fatalf("consumer #%d: status %d, want 200", i, w.Code)
		}
	}
	after := heaptest.Live()
	if grown := int64(after) - int64(before); grown >= 50<<20 {
		t.Fatalf("heap grew by %d MB for 20,000 consumer ids of 60 KB, want < 50 MB", grown>>20)
	}
	t.Logf("heap grew by %d KB", (int64(after)-int64(before))>>10)
	runtime.KeepAlive(h)
}
