package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/httpprotect/protect"
	"github.com/httpprotect/protect/store"
)

// setupCheckTimeout bounds the check of the store's setup at start.
const setupCheckTimeout = 3 * time.Second

// checkSetup logs what in the store's setup puts bans at risk (an
// eviction policy that can evict them, no persistence), one warning
// each, at start and in -check; a store that cannot be checked (a
// managed Redis refusing CONFIG) is said at info level: protectd runs
// all the same, it is the operator's to fix.
func checkSetup(ctx context.Context, st protect.Store, log *slog.Logger) {
	sc, ok := st.(store.SetupChecker)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, setupCheckTimeout)
	defer cancel()
	warnings, err := sc.CheckSetup(ctx)
	if err != nil {
		log.Info("protect: store setup not checked", "error", err.Error())
		return
	}
	for _, w := range warnings {
		log.Warn("protect: store setup puts bans at risk", "setting", w.Setting, "value", w.Value,
			"server", w.Server, "risk", w.Risk, "fix", w.Fix)
	}
}
