package protect_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"
)

// redisLog sends go-redis's plain-text log lines to slog.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// go-redis logs through a process-wide logger, which protect never
// changes. A program routes those lines into its structured logs once, in
// main. (No Output: running it would change the test process's logger.)
func Example_redisLogger() {
	redis.SetLogger(redisLog{slog.Default()})
}
