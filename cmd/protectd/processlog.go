package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/grpclog"
)

// The process's own loggers (the log package's default, slog's default,
// go-redis's and grpc's) are globals of their packages. protectd points
// them, once, at processLog, which hands every line to the logger of the
// run in progress: so every line protectd prints is in its log's format,
// JSON, whoever writes it. Between runs (and before the first) a line
// goes to a JSON handler on the process's stderr. It is an init of the
// command, not of a library: grpclog's logger must be set before any
// gRPC code runs, which main cannot promise for the package's tests.
func init() {
	slog.SetDefault(slog.New(processLog)) // and the log package's default logger with it
	redis.SetLogger(redisLog{})
	grpclog.SetLoggerV2(grpcLog{min: grpcSeverity(os.Getenv("GRPC_GO_LOG_SEVERITY_LEVEL"))})
}

// processLog is the handler the process's own loggers write to.
var processLog = &runHandler{fallback: slog.NewJSONHandler(os.Stderr, nil)}

// runHandler is a slog.Handler that writes to the handler of the latest
// run still in progress.
type runHandler struct {
	mu       sync.RWMutex
	runs     []*runLog // in the order they started
	fallback slog.Handler
}

// runLog is where one run's process lines go.
type runLog struct {
	h slog.Handler
	// quietRedis drops go-redis's lines: -check says in one sentence
	// whether the store answered.
	quietRedis bool
}

// use makes h the handler of the process's loggers until the returned
// function is called, at the end of the run; with quietRedis, go-redis's
// lines are dropped.
func (r *runHandler) use(h slog.Handler, quietRedis bool) (done func()) {
	l := &runLog{h: h, quietRedis: quietRedis}
	r.mu.Lock()
	r.runs = append(r.runs, l)
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if i := slices.Index(r.runs, l); i >= 0 {
			r.runs = slices.Delete(r.runs, i, i+1)
		}
	}
}

// redisQuiet reports whether the current run drops go-redis's lines.
func (r *runHandler) redisQuiet() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := len(r.runs)
	return n > 0 && r.runs[n-1].quietRedis
}

// handle writes rec to the current handler, as the steps of WithAttrs
// and WithGroup make it, under the read lock: a run that ends waits for
// the lines in flight to its handler.
func (r *runHandler) handle(ctx context.Context, rec slog.Record, steps []func(slog.Handler) slog.Handler) error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h := r.fallback
	if n := len(r.runs); n > 0 {
		h = r.runs[n-1].h
	}
	for _, step := range steps {
		h = step(h)
	}
	if !h.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.Handle(ctx, rec)
}

func (r *runHandler) Enabled(context.Context, slog.Level) bool { return true }

func (r *runHandler) Handle(ctx context.Context, rec slog.Record) error {
	return r.handle(ctx, rec, nil)
}

func (r *runHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return derived{r, []func(slog.Handler) slog.Handler{func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) }}}
}

func (r *runHandler) WithGroup(name string) slog.Handler {
	return derived{r, []func(slog.Handler) slog.Handler{func(h slog.Handler) slog.Handler { return h.WithGroup(name) }}}
}

// derived is a runHandler with attributes or groups added, replayed on
// the current handler at each line.
type derived struct {
	root  *runHandler
	steps []func(slog.Handler) slog.Handler
}

func (d derived) Enabled(context.Context, slog.Level) bool { return true }

func (d derived) Handle(ctx context.Context, rec slog.Record) error {
	return d.root.handle(ctx, rec, d.steps)
}

func (d derived) WithAttrs(attrs []slog.Attr) slog.Handler {
	return derived{d.root, append(d.steps[:len(d.steps):len(d.steps)], func(h slog.Handler) slog.Handler { return h.WithAttrs(attrs) })}
}

func (d derived) WithGroup(name string) slog.Handler {
	return derived{d.root, append(d.steps[:len(d.steps):len(d.steps)], func(h slog.Handler) slog.Handler { return h.WithGroup(name) })}
}

// redisLog is go-redis's logger: its lines (a pool that failed to dial,
// say) are warnings, with msg "redis" and the line in "line". protectd
// says what a store failure means itself (the breaker, the failure
// policy); these are the client's own detail.
type redisLog struct{}

func (redisLog) Printf(ctx context.Context, format string, v ...any) {
	if processLog.redisQuiet() {
		return
	}
	line := strings.TrimPrefix(strings.TrimSpace(fmt.Sprintf(format, v...)), "redis: ")
	slog.New(processLog).LogAttrs(context.WithoutCancel(ctx), slog.LevelWarn, "redis", slog.String("line", line))
}

// grpcLog is grpc's logger: lines at min and above are written, with msg
// "grpc" and the line in "line"; as grpc's own default, min is error
// unless GRPC_GO_LOG_SEVERITY_LEVEL says info or warning. Verbosity is
// 0: grpc's V(1) and above are never written.
type grpcLog struct{ min slog.Level }

// grpcSeverity reads GRPC_GO_LOG_SEVERITY_LEVEL as grpc does.
func grpcSeverity(v string) slog.Level {
	switch strings.ToLower(v) {
	case "info":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	}
	return slog.LevelError
}

func (g grpcLog) log(level slog.Level, line string) {
	if level < g.min {
		return
	}
	slog.New(processLog).LogAttrs(context.Background(), level, "grpc", slog.String("line", strings.TrimSpace(line)))
}

func (g grpcLog) Info(args ...any)   { g.log(slog.LevelInfo, fmt.Sprint(args...)) }
func (g grpcLog) Infoln(args ...any) { g.log(slog.LevelInfo, fmt.Sprintln(args...)) }
func (g grpcLog) Infof(format string, args ...any) {
	g.log(slog.LevelInfo, fmt.Sprintf(format, args...))
}
func (g grpcLog) Warning(args ...any)   { g.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (g grpcLog) Warningln(args ...any) { g.log(slog.LevelWarn, fmt.Sprintln(args...)) }
func (g grpcLog) Warningf(format string, args ...any) {
	g.log(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (g grpcLog) Error(args ...any)   { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLog) Errorln(args ...any) { g.log(slog.LevelError, fmt.Sprintln(args...)) }
func (g grpcLog) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}

// Fatal is grpc's last word: written as an error, and the process ends
// with exit 1, as grpc's own logger does.
func (g grpcLog) Fatal(args ...any)                 { g.fatal(fmt.Sprint(args...)) }
func (g grpcLog) Fatalln(args ...any)               { g.fatal(fmt.Sprintln(args...)) }
func (g grpcLog) Fatalf(format string, args ...any) { g.fatal(fmt.Sprintf(format, args...)) }
func (g grpcLog) V(l int) bool                      { return l <= 0 }

func (g grpcLog) fatal(line string) {
	slog.New(processLog).LogAttrs(context.Background(), slog.LevelError, "grpc", slog.String("line", strings.TrimSpace(line)))
	os.Exit(exitFailure)
}
