package admin

import (
	"context"

	"github.com/httpprotect/protect"
)

// ServiceConfig returns cfg with the limits the service publishes under
// cfg's namespace in cfg.Store (Space.Publish), and whether there were
// any: a tool built from it counts, inspects and explains with the numbers
// the service enforces, not its own defaults. Without published limits
// cfg is returned as it is. Everything else (aggregation, trusted
// proxies, safe networks) still comes from cfg: the store does not hold
// it.
func ServiceConfig(ctx context.Context, cfg protect.Config) (protect.Config, bool, error) {
	if cfg.Store == nil {
		return cfg, false, nil
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = protect.DefaultNamespace
	}
	lim, ok, err := cfg.Store.Published(ctx, ns)
	if err != nil || !ok {
		return cfg, false, err
	}
	cfg.MaxRequests, cfg.TTL, cfg.BanLimit = lim.MaxRequests, lim.TTL, lim.BanLimit
	cfg.BanDuration, cfg.BanFactor, cfg.MaxBanDuration, cfg.OffenseWindow = lim.BanDuration, lim.BanFactor, lim.MaxBanDuration, lim.OffenseWindow
	return cfg, true, nil
}

// published reports whether the protector's MaxRequests and BanLimit are
// those its namespace publishes.
func (a *Admin) published(ctx context.Context) bool {
	cfg := a.p.Config()
	lim, ok, err := cfg.Store.Published(ctx, cfg.Namespace)
	return err == nil && ok && lim.MaxRequests == cfg.MaxRequests && lim.BanLimit == cfg.BanLimit
}
