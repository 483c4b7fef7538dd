package main

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/httpprotect/protect"
)

// keySlots is how many keys keyValues remembers. One slot is a pointer;
// a key that collides with another only costs the allocation it would
// have cost without the cache.
const keySlots = 4096

// keyValues holds the X-Protect-Key header values of recently seen
// keys, so that answering a client seen before allocates nothing for
// it: the values are shared between responses, which the server only
// reads. Each slot keeps the last key hashed to it; the memory is
// bounded by keySlots whatever the clients do. The zero value is not
// usable: make one with newKeyValues.
type keyValues struct {
	seed  maphash.Seed
	slots [keySlots]atomic.Pointer[keyValue]
}

type keyValue struct {
	key protect.Key
	v   []string
}

func newKeyValues() *keyValues { return &keyValues{seed: maphash.MakeSeed()} }

// get returns []string{k.String()}, from the cache when it can.
func (c *keyValues) get(k protect.Key) []string {
	var h maphash.Hash
	h.SetSeed(c.seed)
	if k.Name != "" {
		h.WriteString(k.Name)
	} else {
		a := k.Prefix.Addr().As16()
		h.Write(a[:])
		h.WriteByte(byte(k.Prefix.Bits()))
	}
	slot := &c.slots[h.Sum64()%keySlots]
	if e := slot.Load(); e != nil && e.key == k {
		return e.v
	}
	e := &keyValue{key: k, v: []string{k.String()}}
	slot.Store(e)
	return e.v
}
