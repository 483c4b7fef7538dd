package protect

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/httpprotect/protect/store"
)

// maxLoggedDamage bounds the damaged records a guard remembers having
// logged; past it the memory starts over, and a record may be logged
// again.
const maxLoggedDamage = 4096

// damageLog logs each damaged record once.
type damageLog struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// malformed counts a request that met the damaged record of err, and logs
// the record the first time this guard meets it.
//
//go:noinline
func (g *guard) malformed(ctx context.Context, k Key, err error) {
	p := g.p
	p.stats.stripe(keyHint(k)).malformed.Add(1)
	var me *store.MalformedError
	id := err.Error()
	if errors.As(err, &me) {
		id = me.Key + "\x00" + me.Record
	}
	dl := &g.damage
	dl.mu.Lock()
	_, seen := dl.seen[id]
	if !seen {
		if dl.seen == nil || len(dl.seen) >= maxLoggedDamage {
			dl.seen = make(map[string]struct{})
		}
		dl.seen[id] = struct{}{}
	}
	dl.mu.Unlock()
	if seen {
		return
	}
	attrs := []slog.Attr{slog.String("client", k.String()), slog.String("namespace", p.cfg.Namespace), slog.Any("error", err)}
	if me != nil {
		attrs = append(attrs, slog.String("key", me.Key))
	}
	p.cfg.Logger.LogAttrs(ctx, slog.LevelError, "protect: malformed record in the store, decided as if it were absent; lift it (protectctl lift) or repair it", attrs...)
}
