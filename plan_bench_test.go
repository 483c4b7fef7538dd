package protect

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkVerifyConsumer measures VerifyConsumer on the memory store:
// one hot consumer and 10k consumers, under a plan of one Rate (the
// harness's project-plan) and of a Rate and a monthly Quota, from one
// goroutine (seq) and from GOMAXPROCS (par). Nothing is ever refused.
func BenchmarkVerifyConsumer(b *testing.B) {
	ctx := context.Background()
	plans := map[string]*Plan{
		"rate":       mustPlan(b, "bench", Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour, Burst: 1 << 32}),
		"rate+quota": mustPlan(b, "bench2", Rate{Name: "rate", Limit: 1 << 32, Period: time.Hour}, Quota{Name: "monthly", Limit: 1 << 40, Period: Monthly}),
	}
	for _, planName := range []string{"rate", "rate+quota"} {
		plan := plans[planName]
		for _, n := range []int{1, 10_000} {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("cus_%d", i)
			}
			keys := "hot"
			if n > 1 {
				keys = fmt.Sprintf("keys=%d", n)
			}
			for _, par := range []bool{false, true} {
				mode := "seq"
				if par {
					mode = "par"
				}
				b.Run(planName+"/"+keys+"/"+mode, func(b *testing.B) {
					p, err := New(Config{BanLimit: -1, OnStoreError: FailOpen, Logger: discardLogger()})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { p.Close() })
					for _, id := range ids {
						p.VerifyConsumer(ctx, id, plan)
					}
					b.ReportAllocs()
					b.ResetTimer()
					if !par {
						i := 0
						for b.Loop() {
							if d, _ := p.VerifyConsumer(ctx, ids[i], plan); d.Refused() {
								b.Fatalf("VerifyConsumer(%q) = %v, want allowed", ids[i], d.Status)
							}
							if i++; i == n {
								i = 0
							}
						}
						return
					}
					var seq atomic.Int64
					b.RunParallel(func(pb *testing.PB) {
						i := int(seq.Add(7919)) % n
						for pb.Next() {
							p.VerifyConsumer(ctx, ids[i], plan)
							if i++; i == n {
								i = 0
							}
						}
					})
				})
			}
		}
	}
}
