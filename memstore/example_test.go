package memstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/httpprotect/protect"
)

// A memory store on a state file keeps its bans across a restart: here
// the store is closed and opened again, as a process that restarts does.
func ExampleOpenMemoryStore() {
	dir, _ := os.MkdirTemp("", "protect-example-")
	defer os.RemoveAll(dir)
	opt := protect.MemoryOptions{Path: filepath.Join(dir, "protect.db"), Logger: slog.New(slog.DiscardHandler)}
	ctx := context.Background()
	client := netip.MustParseAddr("203.0.113.7")

	store, err := protect.OpenMemoryStore(opt)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := protect.New(protect.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	p.Ban(ctx, client.String(), protect.BanOptions{For: 48 * time.Hour, Reason: "abuse report"})
	p.Close()
	store.Close() // the caller's store: closed after its protectors

	store, err = protect.OpenMemoryStore(opt)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	p, _ = protect.New(protect.Config{Store: store, Logger: slog.New(slog.DiscardHandler)})
	defer p.Close()
	d, _ := p.VerifyAddr(ctx, client)
	fmt.Println(d.Status, d.RetryAfter.Round(time.Hour), d.Ban.Reason)
	// Output:
	// banned 48h0m0s abuse report
}
