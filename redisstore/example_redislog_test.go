package redisstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
)

// redisLog sends go-redis's plain-text log lines to slog.
type redisLog struct{ l *slog.Logger }

func (r redisLog) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}

// go-redis logs through a process-wide logger, which protect never
// changes. A program routes those lines into its structured logs once, in
// main, with redis.SetLogger(redisLog{slog.Default()}); here the adapter
// writes one line as go-redis would.
func Example_redisLogger() {
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	logger := redisLog{slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime}))}
	logger.Printf(context.Background(), "redis: discarding bad PubSub connection: %v", "EOF")
	// Output: level=WARN msg="redis: discarding bad PubSub connection: EOF" component=go-redis
}
