package admin_test

import (
	"fmt"
	"testing"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/admin"
	"github.com/httpprotect/protect/internal/testclock"
)

// A flood of one-off keys through a full table gives each the count of
// the key whose place it took: Top shows what is certain (AtLeast, 1
// each), never the inherited count, and ranks by it; a heavy hitter that
// keeps coming stays, first, with its true count.
func TestRefusedShowsCertainCount(t *testing.T) {
	clock := testclock.New()
	r := admin.NewRefused(0, clock.Now)
	for i := range 64 * 40 {
		if i%20 == 0 {
			r.Add("198.51.100.1", protect.Banned) // 128 refusals, among the others
		}
		r.Add(fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), protect.Limited) // each refused once
	}
	top := r.Top(0)
	if len(top) != admin.DefaultRefusedSize {
		t.Fatalf("len(Top(0)) = %d, want %d", len(top), admin.DefaultRefusedSize)
	}
	if top[0].Key != "198.51.100.1" || top[0].AtLeast() != 128 || top[0].Count != 128 {
		t.Errorf("Top(0)[0] = %+v, AtLeast %d; want 198.51.100.1, 128 of 128", top[0], top[0].AtLeast())
	}
	for _, k := range top[1:] {
		if k.AtLeast() != 1 || k.Count <= 1 {
			t.Errorf("Top(0): one-off key %+v, AtLeast %d; want AtLeast 1, an inherited Count above 1", k, k.AtLeast())
		}
	}
}

// Top ranks by the certain count: a key that inherited most of its Count
// comes after one refused fewer times in all but more for certain.
func TestRefusedRanksByCertainCount(t *testing.T) {
	clock := testclock.New()
	r := admin.NewRefused(2, clock.Now)
	add := func(key string, n int) {
		t.Helper()
		for range n {
			r.Add(key, protect.Limited)
		}
	}
	add("c", 25)
	add("x", 24)
	add("a", 5) // takes x's place: 29, of which 24 inherited
	got := r.Top(0)
	want := []admin.RefusedKey{
		{Key: "c", Count: 25, Status: "limited", Last: clock.Now()},
		{Key: "a", Count: 29, Error: 24, Status: "limited", Last: clock.Now()},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("Top(0) = %+v, want %+v", got, want)
	}
}

// The cost of one refusal through a full table: of a key new to it (it
// takes the place of the least counted), and of a key in it.
func BenchmarkRefusedAdd(b *testing.B) {
	for _, size := range []int{64, 4096} {
		keys := make([]string, 1<<16)
		for i := range keys {
			keys[i] = fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		}
		b.Run(fmt.Sprintf("size=%d/new", size), func(b *testing.B) {
			r := admin.NewRefused(size, nil)
			i := 0
			for b.Loop() {
				i++
				r.Add(keys[i&(1<<16-1)], protect.Limited)
			}
		})
		b.Run(fmt.Sprintf("size=%d/held", size), func(b *testing.B) {
			r := admin.NewRefused(size, nil)
			for i := range size {
				r.Add(keys[i], protect.Limited)
			}
			i := 0
			for b.Loop() {
				i++
				r.Add(keys[i%size], protect.Limited)
			}
		})
		b.Run(fmt.Sprintf("size=%d/new-parallel", size), func(b *testing.B) {
			r := admin.NewRefused(size, nil)
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					i += 7
					r.Add(keys[i&(1<<16-1)], protect.Limited)
				}
			})
		})
	}
}
