package protect

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVerifyAddrStateFile measures VerifyAddr on a memory store
// without a file and with one, on one hot address and on 10k: the state
// file must cost the request path nothing (0 allocs, the same time).
func BenchmarkVerifyAddrStateFile(b *testing.B) {
	ctx := context.Background()
	for _, file := range []bool{false, true} {
		for _, n := range []int{1, 10_000} {
			name := fmt.Sprintf("file=%t/keys=%d", file, n)
			b.Run(name, func(b *testing.B) {
				p := benchStateProtector(b, file)
				addrs := benchAddrs(n)
				for _, a := range addrs {
					p.VerifyAddr(ctx, a)
				}
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					p.VerifyAddr(ctx, addrs[i])
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}

// BenchmarkVerifyConsumerStateFile is BenchmarkVerifyAddrStateFile for a
// consumer under a plan of a rate and a monthly quota: with a file, each
// charge marks the consumer's entry for the writer.
func BenchmarkVerifyConsumerStateFile(b *testing.B) {
	ctx := context.Background()
	plan := mustPlan(b, "pro", Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour}, Quota{Name: "monthly", Limit: 1 << 40, Period: Monthly})
	for _, file := range []bool{false, true} {
		b.Run(fmt.Sprintf("file=%t", file), func(b *testing.B) {
			p := benchStateProtector(b, file)
			p.VerifyConsumer(ctx, "acme", plan)
			b.ReportAllocs()
			for b.Loop() {
				p.VerifyConsumer(ctx, "acme", plan)
			}
		})
	}
}

// benchStateProtector is benchProtector on a memory store with a state
// file or without one.
func benchStateProtector(b *testing.B, file bool) *Protector {
	b.Helper()
	var store *MemoryStore
	if file {
		var err error
		store, err = OpenMemoryStore(MemoryOptions{Path: filepath.Join(b.TempDir(), "protect.db"), Logger: discardLogger()})
		if err != nil {
			b.Fatal(err)
		}
	} else {
		store = NewMemoryStore(MemoryOptions{})
	}
	b.Cleanup(func() { store.Close() })
	p, err := New(Config{Store: store, MaxRequests: 1 << 62, BanLimit: -1, Logger: discardLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close() })
	return p
}
